"""The actor, the critic V and its exact copy V_target, assembled from the model's named
parts (models/spec.py): an encoder and a head each, as Keras layers of the kinds the
part registry (models/registry.py) picks for the spec. No losses here.

Two topologies:
- separate: actor and critic have encoders of their own (no variable in common);
- shared:   one encoder feeds both heads: `parts["critic.encoder"]` is the very object
            `parts["actor.encoder"]` is (tests check it).

Every pass runs encoder -> core -> head from the parts, a feed-forward model through the
identity core (IdentityCore), a recurrent one through its core unrolled over the
rollout (UnrolledCore); the Keras models hold the parts for checkpoints.

V_target always has its own variables (its own encoder too): it is V, frozen between
syncs. With normalize_obs, all three read observations through one ObsNormalizer (the
running statistics, learning/normalizers.py; the Keras models themselves take
normalised input).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import keras
import tensorflow as tf

from distributed_ac.envs.space import EnvSpace
from distributed_ac.learning import distributions
from distributed_ac.learning.normalizers import ObsNormalizer
from distributed_ac.learning.twin_check import check_encoder
from distributed_ac.models import registry
from distributed_ac.models import spec as names
from distributed_ac.models.keras_heads import DenseHead, LogStd, masked
from distributed_ac.models.spec import ModelSpec


class Sequence(NamedTuple):
    """How a recurrent model's B = T x N rows unroll: shape [T, N], the actor's and the
    critic's core state at the rollout's start (tuples of [N, H]), starts [T, N]."""

    shape: object
    actor_state: tuple
    critic_state: tuple
    starts: object


class IdentityCore:
    """The core of a feed-forward model (core none): features pass through unchanged, so
    feed-forward and recurrent models run one path, encoder -> core -> head."""

    def features(self, x, seq, shared: bool, network: str):
        return x


IDENTITY_CORE = IdentityCore()


class UnrolledCore:
    """A recurrent core (a Keras layer of models/keras_cores.py) over flat rows: the
    encoder's features [T x N, F] unrolled over the rollout's steps from the stored
    state (zeroed where an episode starts), back to flat rows [T x N, H]."""

    def __init__(self, layer):
        self.layer = layer

    def features(self, x, seq: Sequence, shared: bool, network: str):
        out, _ = self.layer(_as_steps(x, seq), _state(network, seq, shared), seq.starts)
        return tf.reshape(out, [-1, self.layer.units])


def _as_steps(x, seq: Sequence):
    """Flat rows [T x N, F] as the core reads them, [T, N, F]."""
    steps = seq.starts.shape[0] or seq.shape[0]  # static where the signature fixes T
    return tf.reshape(x, [steps, seq.shape[1], x.shape[-1]])


def _state(network: str, seq: Sequence, shared: bool) -> tuple:
    """The stored state `network`'s core starts from (the shared topology's critic reads
    the actor's core, so it starts from the actor's)."""
    return tuple(seq.actor_state if network == "actor" or shared else seq.critic_state)


@dataclasses.dataclass
class Networks:
    spec: ModelSpec
    actor: keras.Model  # obs -> logits, or [mean, log_std]
    critic: keras.Model  # obs -> V(obs) [B, 1]
    v_target: keras.Model  # obs -> V_target(obs) [B, 1], the critic's architecture
    parts: dict  # part name (models/spec.py) -> its Keras layer
    obs_norm: ObsNormalizer | None = None  # running observation statistics (normalize_obs)

    def __post_init__(self):
        # each network's core as _features runs it: the identity without a recurrent one
        self.cores = {network: (UnrolledCore(self.parts[f"{network}.core"])
                                if f"{network}.core" in self.parts else IDENTITY_CORE)
                      for network in ("actor", "critic", "v_target")}

    @property
    def shared(self) -> bool:
        return self.spec.shared

    def _trainable(self, names_: tuple) -> list:
        return [v for n in names_ if n in self.parts for v in self.parts[n].trainable_variables]

    @property
    def actor_variables(self) -> list:
        """What the actor optimizer updates: encoder (the shared one too), head, log_std."""
        return self._trainable((names.ACTOR_ENCODER, names.ACTOR_CORE, names.ACTOR_HEAD,
                                names.LOG_STD))

    @property
    def critic_variables(self) -> list:
        """What the critic optimizer updates: the critic's encoder and core when it has
        its own, and its value head."""
        own = ((names.CRITIC_HEAD,) if self.shared
               else (names.CRITIC_ENCODER, names.CRITIC_CORE, names.CRITIC_HEAD))
        return self._trainable(own)

    def actor_and_value(self, obs, seq: "Sequence | None" = None, critic_obs=None):
        """The actor's output and V(obs) [B, 1] from one pass over the encoder (and core).
        In the shared topology calling `actor` and then `critic` would run the encoder (a
        CNN, for pixels) twice forward and twice backward; here both heads read one set of
        features. The gradients are the same: the encoder's is the sum of what each head
        sends back. `seq`: with a recurrent core, how the B = T x N rows unroll;
        `critic_obs` [B, critic_width]: what a centralised critic reads instead of obs."""
        features = self._features("actor", obs, seq)
        critic = features if self.shared else self._features(
            "critic", obs if critic_obs is None else critic_obs, seq)
        return self._policy(features), self.parts[names.CRITIC_HEAD](critic)

    def actor_output(self, obs, seq: "Sequence | None" = None):
        """The actor's output alone (logits, or the Gaussian's mean and log std)."""
        return self._policy(self._features("actor", obs, seq))

    def _policy(self, features):
        pi = self.parts[names.ACTOR_HEAD](features)
        return [pi, self.parts[names.LOG_STD](pi)] if names.LOG_STD in self.parts else pi

    def entering_states(self, obs, seq: "Sequence") -> tuple[tuple, tuple]:
        """(actor's, critic's) core state entering each of the rollout's T steps, tuples
        of [T, N, H], from the stored states (the shared topology's critic reads the
        actor's core, so its states are the actor's)."""
        def states(network):
            x = self.parts[f"{network}.encoder"](obs)
            return self.parts[f"{network}.core"].entering_states(
                _as_steps(x, seq), _state(network, seq, self.shared), seq.starts)

        actor = states("actor")
        return actor, actor if self.shared else states("critic")

    def _features(self, network: str, obs, seq: "Sequence | None"):
        """The encoder's features of flat observations, through the network's core: a
        recurrent one unrolled over the rollout's steps from the stored state (zeroed
        where an episode starts), or the feed-forward model's identity core."""
        return self.cores[network].features(self.parts[f"{network}.encoder"](obs), seq,
                                            self.shared, network)

    def path(self, network: str) -> list:
        """One network's variables from observation to output, encoder first, in bundle
        order: network is "actor", "critic" or "v_target"."""
        return [v for n in (f"{network}.encoder", f"{network}.core", f"{network}.head",
                            f"{network}.log_std")
                if n in self.parts for v in self.parts[n].bundle_variables]

    def bundle(self, part_names) -> dict[str, list]:
        """{part name: its variables in bundle order} for the parts this model has."""
        return {n: self.parts[n].bundle_variables for n in part_names if n in self.parts}


def _encoder(spec: ModelSpec, prefix: str, seed: int):
    return registry.keras_module(registry.encoder_of(spec)).from_spec(spec, prefix, seed)


def network_input(space: EnvSpace, make):
    """What the encoders read, as make(shape, dtype, name) builds each array: the
    observation, or a mixed one's image and (normalised) vector entries side by side."""
    if space.mixed:
        return {names.IMAGE: make(space.obs_shape, space.obs_dtype, names.IMAGE),
                names.VECTOR: make((space.vector_width,), "float32", names.VECTOR)}
    return make(space.obs_shape, space.obs_dtype, "obs")


def _keras_input(shape, dtype, name):
    return keras.Input(shape=shape, dtype=dtype, name=name)


def critic_network_input(space: EnvSpace, make):
    """What the critic's and V_target's encoders read: the observations as the actor's
    do, or a centralised critic's float32 rows (envs/central.py)."""
    if space.critic_width:
        return make((space.critic_width,), "float32", "critic_obs")
    return network_input(space, make)


def _models(space: EnvSpace, parts: dict) -> tuple:
    """Actor, critic and V_target as Keras models of observations (the critic's and
    V_target's of a centralised critic's input)."""
    inp = network_input(space, _keras_input)
    pi_out = parts[names.ACTOR_HEAD](parts[names.ACTOR_ENCODER](inp))
    if names.LOG_STD in parts:
        pi_out = [pi_out, parts[names.LOG_STD](pi_out)]
    actor = keras.Model(inp, pi_out, name="actor")
    c_inp = critic_network_input(space, _keras_input) if space.critic_width else inp
    critic = keras.Model(c_inp, parts[names.CRITIC_HEAD](parts[names.CRITIC_ENCODER](c_inp)),
                         name="critic")
    t_inp = critic_network_input(space, _keras_input)
    v_target = keras.Model(t_inp, parts[names.TARGET_HEAD](parts[names.TARGET_ENCODER](t_inp)),
                           name="v_target")
    return actor, critic, v_target


class PartsOf(tf.Module):
    """One network's parts held together (for checkpoints) where they are not one Keras
    model of observations: a recurrent core also takes the rollout's state."""

    def __init__(self, name: str, parts: dict):
        super().__init__(name=name)
        for part_name, layer in parts.items():
            if part_name.startswith(name + "."):
                setattr(self, part_name.split(".", 1)[1], layer)


def _recurrent_models(spec: ModelSpec, space: EnvSpace, parts: dict, s: int) -> tuple:
    """The cores (the shared topology's one core too), every part built, and each
    network's parts as a PartsOf."""
    cores = registry.keras_module(registry.core_of(spec))
    parts[names.CRITIC_CORE] = cores.from_spec(spec, "trunk" if spec.shared else "critic", s + 600)
    parts[names.ACTOR_CORE] = (parts[names.CRITIC_CORE] if spec.shared
                               else cores.from_spec(spec, "actor", s + 700))
    parts[names.TARGET_CORE] = cores.from_spec(spec, "target", s + 800)
    one = network_input(space, lambda shape, dtype, _: tf.zeros([1, *shape], dtype))
    for network in ("actor", "critic", "v_target"):
        width = parts[f"{network}.encoder"](one).shape[-1]  # builds the encoder
        for name, shape in ((f"{network}.core", (None, width)),
                            (f"{network}.head", (None, spec.core_size))):
            if not parts[name].built:  # the shared topology's core is the actor's
                parts[name].build(shape)
    return tuple(PartsOf(n, parts) for n in ("actor", "critic", "v_target"))


def build_networks(spec: ModelSpec, space: EnvSpace, seed: int) -> Networks:
    """Build actor, critic and V_target for `spec`; V_target starts equal to V."""
    s = seed * 1000
    critic_spec = spec.critic_spec  # spec itself unless the critic reads an input of its own
    critic_encoder = _encoder(critic_spec, "trunk" if spec.shared else "critic", s + 100)
    parts = {names.CRITIC_ENCODER: critic_encoder,
             names.ACTOR_ENCODER: critic_encoder if spec.shared else _encoder(spec, "actor", s),
             # a small init keeps a new policy near uniform (cleanRL)
             names.ACTOR_HEAD: DenseHead(spec.num_actions, "pi_head", 0.01, s + 200),
             names.CRITIC_HEAD: DenseHead(1, "v_head", 1.0, s + 300),
             names.TARGET_ENCODER: _encoder(critic_spec, "target", s + 400),
             names.TARGET_HEAD: DenseHead(1, "target_v_head", 1.0, s + 500)}
    if registry.head_of(spec).log_std:
        parts[names.LOG_STD] = LogStd(spec.num_actions, spec.log_std_init, name="log_std")
    if spec.recurrent:
        actor, critic, v_target = _recurrent_models(spec, space, parts, s)
    else:
        actor, critic, v_target = _models(space, parts)
    # a user's encoder: its twin must compute what the layer computes (twin_check.py)
    check_encoder(spec, space, parts[names.ACTOR_ENCODER])
    for part in (names.TARGET_ENCODER, names.TARGET_CORE, names.TARGET_HEAD):
        if part in parts:  # V_target is V's copy: no optimizer steps it
            parts[part].trainable = False
    obs_norm = ObsNormalizer(space.vector_width, spec.obs_clip) if spec.obs_norm else None
    nets = Networks(spec, actor, critic, v_target, parts, obs_norm)
    sync_target(nets, 1.0)
    return nets


CRITIC_TO_TARGET = ((names.CRITIC_ENCODER, names.TARGET_ENCODER),
                    (names.CRITIC_CORE, names.TARGET_CORE),
                    (names.CRITIC_HEAD, names.TARGET_HEAD))


def sync_target(nets: Networks, tau: float) -> None:
    """V_target <- tau * V + (1 - tau) * V_target; tau = 1 is an exact copy."""
    for critic_part, target_part in CRITIC_TO_TARGET:
        if critic_part not in nets.parts:  # no core
            continue
        for t, v in zip(nets.parts[target_part].bundle_variables,
                        nets.parts[critic_part].bundle_variables):
            if tau == 1.0:
                t.assign(v)
            else:
                t.assign(tau * v + (1.0 - tau) * t)


# The model's layout in checkpoints: 2 = the model of named parts (0.2). A checkpoint of
# 0.1 holds a positional layout and no such variable; run/rundir.py refuses it.
MODEL_LAYOUT = 2


def checkpoint_objects(nets: Networks) -> dict:
    """The networks as a checkpoint holds them (all evaluate and export read): the three
    models, the layout they were saved in, and with normalize_obs the statistics."""
    norm = {"obs_norm": nets.obs_norm} if nets.obs_norm is not None else {}
    return {"actor": nets.actor, "critic": nets.critic, "v_target": nets.v_target,
            "model_layout": tf.Variable(MODEL_LAYOUT, trainable=False), **norm}


def greedy_action(spec: ModelSpec, space: EnvSpace, out, legal=None):
    """The deterministic action for the actor's output `out` [B, K] (logits, or the
    Gaussian's mean of u), as the workers' heads act with deterministic=True: each
    categorical's argmax (masked where `legal` [B, K] is false, as the learner's log-probs
    mask) plus its space's start, or the mean squashed into the Box."""
    if legal is not None:
        out = masked(out, legal)
    if spec.head == "multi_categorical":
        action = tf.stack([tf.argmax(z, axis=-1, output_type=tf.int32)
                           for z in tf.split(out, list(space.action_nvec), axis=-1)], axis=-1)
        return action + tf.constant(space.action_starts, tf.int32)
    if spec.head == "categorical":
        return tf.argmax(out, axis=-1) + space.action_start
    return distributions.squash_to_box(out, tf.constant(space.action_low, tf.float32),
                                       tf.constant(space.action_high, tf.float32))
