"""What a run's model is made of: named parts, resolved once from the Config and the
env's spaces (so an encoder that cannot read the observations is refused here).

    actor:    obs -> [obs_norm] -> encoder -> core -> head (categorical logits, or a
              tanh-Gaussian's mean with its state-independent log_std)
    critic:   obs -> [obs_norm] -> encoder -> core -> value head; the actor's encoder
              itself in the shared topology
    V_target: a copy of the critic, with encoder and head of its own

A Weights bundle carries each part's arrays under its name (PARTS below), in the
order the part's `bundle_variables` give on the Keras side; the NumPy twins read them
back by name. Which kinds of part exist, and what each needs of the observations, is
registry.py's table; a new kind is an entry there with its NumPy twin and its TF module.
"""

from __future__ import annotations

import dataclasses

from distributed_ac.config.schema import Config
from distributed_ac.core.errors import ConfigError
from distributed_ac.models import registry
# IMAGE and VECTOR: a mixed observation as the encoders read it, the image and the vector
# entries concatenated (and normalised with normalize_obs). Defined beside the mixed
# encoder's twin, which the registry imports, and read from here by everyone else.
from distributed_ac.models.mixed import IMAGE, VECTOR  # noqa: F401

ACTOR_ENCODER, ACTOR_CORE, ACTOR_HEAD = "actor.encoder", "actor.core", "actor.head"
LOG_STD = "actor.log_std"
CRITIC_ENCODER, CRITIC_CORE, CRITIC_HEAD = "critic.encoder", "critic.core", "critic.head"
TARGET_ENCODER, TARGET_CORE, TARGET_HEAD = "v_target.encoder", "v_target.core", "v_target.head"
OBS_NORM = "obs_norm"
ACTOR_PARTS = (ACTOR_ENCODER, ACTOR_CORE, ACTOR_HEAD, LOG_STD)  # what workers act with
TARGET_PARTS = (TARGET_ENCODER, TARGET_CORE, TARGET_HEAD)  # what workers bootstrap with

NATURE_MIN_PX = registry.ENCODERS["nature"].min_side  # 8x8/4, 4x4/2, 3x3/1 leave 1x1 of 36x36


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    encoder: str
    """mlp or mlp_ln (vectors), nature (images of at least 36x36), small (MinAtar's CNN,
    images of at least 3x3; what torso auto picks under 36x36) or impala (images of any
    size): a name in registry.SHIPPED, or a user's encoder as `module:attr`."""
    hidden_sizes: tuple[int, ...]
    activation: str
    head: str
    """categorical (Discrete actions), multi_categorical (MultiDiscrete) or tanh_gaussian
    (Box actions)."""
    num_actions: int
    shared: bool
    """One encoder for actor and critic (updated by the actor's optimizer)."""
    obs_norm: bool
    """Observations normalised by running statistics before both networks."""
    obs_clip: float
    log_std_init: float
    cnn_precision: str = "float32"
    core: str = "none"
    """none, lstm or gru: the recurrent core between encoder and heads."""
    core_size: int = 0
    mixed: bool = False
    """An image beside vector entries: the encoder is `encoder` for the image and an MLP
    of hidden_sizes for the vector, their features concatenated."""
    critic_width: int = 0
    """critic_input state or joint: the critic and V_target read float32 rows of this
    width (envs/central.py) through an MLP of their own (critic_spec); 0 = they read the
    observation, as the actor does."""

    @staticmethod
    def of(cfg: Config, space) -> "ModelSpec":
        encoder = encoder_for(cfg, space.obs_shape, space.mixed)
        return ModelSpec(encoder=encoder,
                         hidden_sizes=tuple(cfg.hidden_sizes), activation=cfg.activation,
                         head=head_for(space),
                         num_actions=space.num_actions, shared=shared_for(cfg, encoder),
                         obs_norm=obs_normalized(cfg, space.obs_shape, space.mixed),
                         obs_clip=cfg.obs_clip, mixed=space.mixed,
                         log_std_init=cfg.log_std_init, cnn_precision=cfg.cnn_precision,
                         core=cfg.core, critic_width=space.critic_width,
                         core_size=cfg.core_size or _auto_core_size(encoder, cfg.hidden_sizes))

    @property
    def critic_spec(self) -> "ModelSpec":
        """The spec the critic's and V_target's encoders are built from: this one, or
        with a centralised critic an MLP (mlp_ln where the actor's is) of the same
        hidden sizes over its vector rows, never normalised (their statistics are the
        actor's observations')."""
        if not self.critic_width:
            return self
        return dataclasses.replace(self, encoder="mlp_ln" if self.encoder == "mlp_ln" else "mlp",
                                   mixed=False, obs_norm=False, cnn_precision="float32")

    @property
    def recurrent(self) -> bool:
        return self.core != "none"

    @property
    def recurrent_pair(self) -> bool:
        """An actor and a critic with a recurrent core each (the separate topology)."""
        return self.recurrent and not self.shared

    @property
    def image_encoder(self) -> bool:
        """A CNN reads (some of) the observations."""
        return registry.encoder_kind(self.encoder).images

    @property
    def actor_parts(self) -> tuple[str, ...]:
        """The parts a worker acts with, in bundle order."""
        return tuple(p for p in ACTOR_PARTS if (p != ACTOR_CORE or self.recurrent)
                     and (p != LOG_STD or self.head == "tanh_gaussian"))

    @property
    def target_parts(self) -> tuple[str, ...]:
        """The parts a worker bootstraps with, in bundle order."""
        return tuple(p for p in TARGET_PARTS if p != TARGET_CORE or self.recurrent)


def shared_for(cfg: Config, encoder: str) -> bool:
    """Whether actor and critic share a trunk (topology, auto resolved: shared behind a
    CNN, whose backward pass is most of a learner step, and with a recurrent core under
    the clipped surrogate, whose minibatch steps are each a chain of unrolled steps, one
    instead of two (cleanRL's ppo_atari_lstm, Sample Factory); separate otherwise. The
    policy-gradient loss keeps a recurrent core apart: at its rates the critic's
    gradient through a shared core lost CueMemory's cue; docs/notes/recurrent-speed.md)."""
    if cfg.topology == "auto":
        if cfg.critic_input != "own":  # the critic reads an input of its own
            return False
        recurrent_clip = cfg.core != "none" and cfg.policy_loss == "clip"
        return registry.encoder_kind(encoder).images or recurrent_clip
    return cfg.topology == "shared"


def head_for(space) -> str:
    if space.multi_discrete:
        return "multi_categorical"
    return "categorical" if space.discrete else "tanh_gaussian"


def encoder_for(cfg: Config, obs_shape: tuple[int, ...], mixed: bool = False) -> str:
    """The encoder a run builds for observations of `obs_shape` (torso auto resolved); a
    torso or normalize_obs that cannot work with them is a ConfigError. Checked once the
    env's spaces are known, which a Config alone does not know. `mixed`: obs_shape is an
    image entry beside vector entries (which normalize_obs may normalise)."""
    image = len(obs_shape) == 3
    side = min(obs_shape[:2]) if image else 0
    torso = cfg.torso if cfg.torso != "auto" else _auto_torso(image, side)
    kind = registry.encoder_kind(torso)
    shape = "x".join(str(d) for d in obs_shape)
    if image and not kind.images:
        raise ConfigError(f"torso {torso} takes vector observations; '{cfg.env}' gives {shape} "
                          f"images (use --torso {_cnns_for(side)})")
    if not image and kind.images:
        raise ConfigError(f"torso {torso} takes image (H x W x C) observations; '{cfg.env}' "
                          f"gives {shape} vectors (use --torso mlp)")
    if not registry.is_shipped(kind) and cfg.cnn_precision != "float32":
        raise ConfigError(f"cnn_precision {cfg.cnn_precision} is for the shipped CNN torsos; "
                          f"torso {torso} computes as its own layer does (drop --cnn-precision)")
    if not kind.images and cfg.cnn_precision != "float32":
        raise ConfigError(f"cnn_precision {cfg.cnn_precision} is for CNN torsos; an MLP "
                          "always computes in float32 (drop --cnn-precision)")
    if mixed and not registry.is_shipped(kind):
        raise ConfigError(f"torso {torso} reads one observation; '{cfg.env}' gives an image "
                          "beside vector entries, which only the shipped CNN torsos read")
    if image and cfg.normalize_obs is True and not mixed:
        raise ConfigError("normalize_obs is for vector observations; image observations "
                          "are scaled by 1/255 inside the network instead")
    if side < kind.min_side:
        picked = torso if cfg.torso == torso else f"auto ({torso} under 36x36)"
        raise ConfigError(f"torso {picked} needs images of at least {kind.min_side}x"
                          f"{kind.min_side} pixels; '{cfg.env}' gives {shape} "
                          f"(use --torso {_cnns_for(side)})")
    return torso


def _auto_core_size(encoder: str, hidden_sizes: tuple[int, ...]) -> int:
    """core_size auto: the encoder kind's (registry.py says why), behind an MLP as wide as
    its last layer (64 by default)."""
    return registry.encoder_kind(encoder).core_size or hidden_sizes[-1]


def _auto_torso(image: bool, side: int) -> str:
    """torso auto: the Nature CNN where its strides fit the image, MinAtar's below."""
    if not image:
        return "mlp"
    return "nature" if side >= NATURE_MIN_PX else "small"


def _cnns_for(side: int) -> str:
    """The CNN torsos that can read images whose smaller side is `side`, for a refusal."""
    if side >= NATURE_MIN_PX:
        return "nature or impala"
    return "small or impala" if side >= registry.ENCODERS["small"].min_side else "impala"


def obs_normalized(cfg: Config, obs_shape: tuple[int, ...], mixed: bool = False) -> bool:
    """Whether a run normalises observations of `obs_shape` (normalize_obs, auto resolved):
    vectors, and the vector entries beside a mixed observation's image."""
    if cfg.normalize_obs is not None:
        return cfg.normalize_obs
    return len(obs_shape) != 3 or mixed
