"""Vector environments: one place that knows how Gymnasium envs are made and checked.

`make_vector_env` returns a Gymnasium 1.x VectorEnv in NEXT_STEP autoreset mode (the
step after an episode ends is a reset step whose action is ignored; acting/worker.py masks
it). `EnvSpace` is the small, picklable description of the spaces that the learner and
the policy need, so the learner never has to hold an environment.

Observations: a Box that structured.image_shape reads as an image (rank 3 as (H, W, C),
a rank-2 uint8 or bool frame as one channel) keeps its dtype when it is uint8 (Atari
frames: 84 x 84 x 4) all the way to the learner's graph, which scales it by 1/255; any
other Box is flattened to float32 [obs_dim] for an MLP. Dict, Tuple, Discrete,
MultiDiscrete, MultiBinary and Text observations are read as structured.py says.
"""

from __future__ import annotations

import dataclasses
import importlib

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from distributed_ac.core.errors import BadInput, EnvError
from distributed_ac.envs import atari, structured
from distributed_ac.envs.packages import import_packages, unknown_id_hint


@dataclasses.dataclass(frozen=True)
class EnvSpace:
    """What the networks need to know about an env's spaces."""

    env_id: str
    obs_dim: int
    discrete: bool  # integer actions scored by categorical heads (Discrete, MultiDiscrete)
    num_actions: int  # Discrete: actions; MultiDiscrete: sum(nvec), its logits; Box: dimension
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    action_start: int = 0  # Discrete(n, start) offset
    # MultiDiscrete (and MultiBinary, as nvec of 2s): each component's choices and offsets;
    # () for Discrete and Box
    action_nvec: tuple[int, ...] = ()
    action_starts: tuple[int, ...] = ()
    # Dict and Tuple observations (envs/structured.py): the one entry read as it is, or
    # the entries concatenated into one vector, or (mixed) an image entry (obs_key,
    # described by obs_shape and obs_dtype) beside vector entries, each its own array; an
    # `action_mask` (1 = allowed) of num_actions entries, mask_size 0 = no mask used
    mask_size: int = 0
    obs_key: str | int | None = None
    obs_entries: tuple[structured.Entry, ...] = ()
    obs_shape: tuple[int, ...] = ()  # as the networks take one observation; () = (obs_dim,)
    obs_dtype: str = "float32"  # "uint8" for byte images, which stay bytes until the graph
    # observation entries left out of what the networks read (text), said at start-up
    dropped: tuple[str, ...] = dataclasses.field(default=(), compare=False)

    def __post_init__(self):
        if not self.obs_shape:
            object.__setattr__(self, "obs_shape", (self.obs_dim,))

    @property
    def image(self) -> bool:
        """A rank-3 (H, W, C) observation (or, mixed, an image entry), for a CNN torso."""
        return len(self.obs_shape) == 3

    @property
    def mixed(self) -> bool:
        """An image entry beside vector entries: observations are dicts of arrays."""
        return self.obs_key is not None and bool(self.obs_entries)

    @property
    def vector_width(self) -> int:
        """The width of what observation normalisation reads: the vector entries of a
        mixed observation, else the whole (flat) observation."""
        return sum(e.size for e in self.obs_entries) if self.mixed else self.obs_dim

    def obs_arrays(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """A mixed observation's arrays, {key: (shape of one, dtype)}, image first."""
        return {str(self.obs_key): (self.obs_shape, self.obs_dtype),
                **{e.name: ((e.size,), "float32") for e in self.obs_entries}}

    def as_batch(self, obs, n: int):
        """`n` observations as the policy and the learner take them: [n, *obs_shape] of
        obs_dtype (vectors flattened to float32, uint8 images left as they are); mixed,
        a dict of such arrays (obs_arrays)."""
        if not self.obs_entries:  # one array (or a dict's one image entry): checked first
            one = obs if self.obs_key is None else obs[self.obs_key]
            return np.asarray(one, dtype=self.obs_dtype).reshape(n, *self.obs_shape)
        if self.mixed:
            return structured.as_arrays(obs, self.obs_key, (self.obs_shape, self.obs_dtype),
                                        self.obs_entries, n)
        return structured.as_vector(obs, self.obs_entries, n)

    def action_masks(self, obs, n: int) -> np.ndarray | None:
        """The `n` observations' action masks [n, mask_size] bool, or None without one."""
        if not self.mask_size:
            return None
        return np.asarray(obs[structured.MASK_KEY]).reshape(n, self.mask_size) > 0

    @property
    def multi_discrete(self) -> bool:
        return bool(self.action_nvec)

    @property
    def action_shape(self) -> tuple[int, ...]:
        """One stored action's shape: () for Discrete, (components,) for MultiDiscrete,
        (dimension,) for Box (the pre-squash sample)."""
        if self.multi_discrete:
            return (len(self.action_nvec),)
        return () if self.discrete else (self.num_actions,)

    @property
    def action_dtype(self) -> str:
        return "int32" if self.discrete else "float32"

    @property
    def action_kind(self) -> str:
        """discrete, multi_discrete or box (what export and the run's summary call it)."""
        return "multi_discrete" if self.multi_discrete else ("discrete" if self.discrete
                                                            else "box")

    @property
    def half_range(self) -> np.ndarray:
        return (np.asarray(self.action_high, np.float32) - np.asarray(self.action_low, np.float32)) / 2


def resolve_env_id(env: str) -> str:
    """Return a registered Gymnasium id for `env`; a `module:attr` entry point is imported
    and registered under its own name so make_vec treats it like any other id."""
    if ":" not in env:
        atari.register_ale(env)
        if env not in gym.registry:
            raise EnvError(f"unknown environment id '{env}': not in the Gymnasium registry "
                           "(check the spelling, or give a module:Class entry point; "
                           f"{unknown_id_hint(env)})")
        return env
    module_name, _, attr = env.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any import-time failure of user code is reported as one line
        raise EnvError(f"cannot import entry point module '{module_name}': {type(e).__name__}: {e}") from None
    if not callable(getattr(module, attr, None)):
        raise EnvError(f"entry point '{env}': module '{module_name}' has no callable '{attr}'")
    env_id = f"dac-{module_name}.{attr}-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=env)
    return env_id


class _NameSubEnvErrors(gym.Wrapper):
    """Re-raise a sub-env's exception with its index, so a failure can be located."""

    def __init__(self, env: gym.Env, index: int):
        super().__init__(env)
        self.index = index

    def step(self, action):
        try:
            return self.env.step(action)
        except Exception as e:
            e.sub_env_index = self.index  # read by sub_env_of(); the exception stays itself
            raise


def sub_env_of(error: BaseException) -> str:
    """'sub-env i' when the failing sub-env is known (sync vectorization), else why not."""
    index = getattr(error, "sub_env_index", None)
    return f"sub-env {index}" if index is not None else "sub-env unknown (not sync-vectorized)"


def _index_wrapper():
    """A make_vec wrapper that numbers sub-envs in the order SyncVectorEnv creates them."""
    counter = iter(range(1 << 30))
    return lambda env: _NameSubEnvErrors(env, next(counter))


def _vector_mode(vectorization: str, spec: gym.envs.registration.EnvSpec) -> str:
    if vectorization == "auto":
        return "vector_entry_point" if spec.vector_entry_point else "sync"
    if vectorization == "vector_entry_point" and not spec.vector_entry_point:
        raise EnvError(f"'{spec.id}' has no vector_entry_point; use vectorization sync or async")
    return vectorization


def make_vector_env(env: str, num_envs: int, vectorization: str = "auto",
                    preprocess: atari.Preprocess | None = None) -> gym.vector.VectorEnv:
    """A checked VectorEnv of `num_envs` sub-envs in NEXT_STEP autoreset mode, each
    preprocessed as atari.py says (ALE ids always; other envs as `preprocess` asks)."""
    env_id = resolve_env_id(env)
    preprocess = preprocess or atari.Preprocess()
    if atari.is_ale(env_id) and vectorization in ("auto", "vector_entry_point"):
        # ale_py's C++ vector env: 1.6x the agent steps per CPU second of the same
        # preprocessing in Gymnasium's wrappers (benchmarks/atari_env.py, docs/guide/images-atari.md)
        return _checked(made(env, lambda: atari.make_ale_vector(env_id, num_envs, preprocess)), env)
    make_kwargs, extra = _preprocessing(env_id, preprocess)
    mode = "sync" if extra and vectorization == "auto" else _vector_mode(vectorization, gym.spec(env_id))
    if extra and mode == "vector_entry_point":
        raise EnvError(f"'{env}' with image preprocessing needs vectorization sync or async")
    vector_kwargs: dict = {}
    if mode in ("sync", "async"):
        vector_kwargs["autoreset_mode"] = AutoresetMode.NEXT_STEP
    if mode == "async":
        # fork after TensorFlow or Ray threads exist can deadlock; spawn is always safe.
        vector_kwargs["context"] = "spawn"
    wrappers = [*extra, _index_wrapper()] if mode == "sync" else extra or None
    return _checked(made(env, lambda: gym.make_vec(
        env_id, num_envs=num_envs, vectorization_mode=mode, vector_kwargs=vector_kwargs,
        wrappers=wrappers, **make_kwargs)), env)


def reset_seeds(venv: gym.vector.VectorEnv, seeds: list[int]):
    """What `venv.reset(seed=...)` takes to seed sub-env i with seeds[i]: a list for
    Gymnasium's Sync/AsyncVectorEnv, an array for ale_py's AtariVectorEnv. An env's own
    vector class (CartPole's) takes one seed for all its sub-envs: seeds[0]."""
    inner = venv.unwrapped
    if isinstance(inner, (gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv)):
        return list(seeds)
    if type(inner).__name__ == "AtariVectorEnv":  # ale_py's, imported only when used
        return np.asarray(seeds, np.int64)
    return seeds[0]


def made(env: str, make):
    """make(), with any failure but bad input reported as one line naming the env."""
    try:
        return make()
    except BadInput:
        raise
    except Exception as e:
        raise EnvError(f"cannot make environment '{env}': {type(e).__name__}: {e}") from None


def _checked(venv: gym.vector.VectorEnv, env: str) -> gym.vector.VectorEnv:
    autoreset = venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if autoreset != AutoresetMode.NEXT_STEP:
        venv.close()
        raise EnvError(f"'{env}' resets in {autoreset} mode; only NEXT_STEP autoreset is supported")
    space_of(venv, env, text_obs="hash")  # readable at all; the Config says how (space_for)
    return venv


def _preprocessing(env_id: str, p: atari.Preprocess) -> tuple[dict, list]:
    """(make kwargs, wrappers innermost first) of atari.py's preprocessing for this env."""
    if atari.is_ale(env_id):
        return atari.ale_make_kwargs(p), atari.ale_wrappers(p)
    if p.sticky_actions is not None:
        raise EnvError(f"sticky_actions applies to ALE ids only, not '{env_id}'")
    return {}, atari.image_wrappers(p)


def space_of(venv: gym.vector.VectorEnv, env: str, use_mask: bool = True,
             observe_mask: bool = False, text_obs: str = "drop") -> EnvSpace:
    """Describe (and check) a vector env's single observation and action spaces; with
    use_mask False an action_mask is read past (the policy acts as if every action were
    allowed); with observe_mask the networks read it too, as observation entries;
    text_obs: how text entries are read (structured.py)."""
    obs_space, act_space = venv.single_observation_space, venv.single_action_space
    parts = structured.split(obs_space, act_space, env, observe_mask, text_obs)
    space = _space(parts.obs_space if parts else obs_space, act_space, env)
    if parts is None:
        return space
    if parts.mask_size and parts.mask_size != space.num_actions:
        raise EnvError(f"'{env}' has an action_mask of {parts.mask_size} entries for "
                       f"{act_space}, which has {space.num_actions} (one per choice)")
    return dataclasses.replace(space, obs_key=parts.obs_key, obs_entries=parts.entries,
                               mask_size=parts.mask_size if use_mask else 0,
                               dropped=parts.dropped)


def _space(obs_space: gym.spaces.Box, act_space, env: str) -> EnvSpace:
    obs_dim = int(np.prod(obs_space.shape))
    obs = _obs_fields(obs_space)
    if isinstance(act_space, gym.spaces.Discrete):
        return EnvSpace(env, obs_dim, True, int(act_space.n), action_start=int(act_space.start),
                        **obs)
    if isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
        low, high = act_space.low.astype(np.float64), act_space.high.astype(np.float64)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise EnvError(f"'{env}' has an unbounded Box action space; tanh squashing needs finite bounds")
        return EnvSpace(env, obs_dim, False, int(act_space.shape[0]),
                        tuple(low.tolist()), tuple(high.tolist()), **obs)
    multi = _multi_discrete(act_space, env)
    if multi is not None:
        nvec, starts = multi
        return EnvSpace(env, obs_dim, True, sum(nvec), action_nvec=nvec, action_starts=starts,
                        **obs)
    raise EnvError(f"'{env}' has action space {act_space}; only Discrete, MultiDiscrete, "
                   "MultiBinary and 1-D Box are supported")


def _multi_discrete(act_space, env: str):
    """(nvec, starts) of a 1-D MultiDiscrete or MultiBinary space (MultiBinary(n) is n
    choices of {0, 1}); None for any other space."""
    if isinstance(act_space, gym.spaces.MultiBinary):
        if len(act_space.shape) != 1:
            raise EnvError(f"'{env}' has action space {act_space}; only 1-D MultiBinary is supported")
        return (2,) * act_space.shape[0], (0,) * act_space.shape[0]
    if isinstance(act_space, gym.spaces.MultiDiscrete):
        if act_space.nvec.ndim != 1:
            raise EnvError(f"'{env}' has action space {act_space}; only 1-D MultiDiscrete "
                           "is supported")
        return (tuple(int(n) for n in act_space.nvec),
                tuple(int(s) for s in np.broadcast_to(act_space.start, act_space.nvec.shape)))
    return None


def _obs_fields(obs_space: gym.spaces.Box) -> dict:
    """obs_shape and obs_dtype: images (structured.image_shape) as (H, W, C), keeping
    their bytes when uint8 (4x less to step, ship and store than float32; bool images
    become float 0/1); everything else is a flat float32 vector."""
    shape = structured.image_shape(obs_space)
    if shape is None:
        return {}
    dtype = "uint8" if obs_space.dtype == np.uint8 else "float32"
    return {"obs_shape": shape, "obs_dtype": dtype}


def vector_env_for(cfg, num_envs: int) -> gym.vector.VectorEnv:
    """make_vector_env for a Config: its env, vectorization and preprocessing (after
    importing its gym_packages, in whichever process this runs)."""
    import_packages(cfg.gym_packages)
    return make_vector_env(cfg.env, num_envs, cfg.vectorization, atari.Preprocess.of(cfg))


def space_for(cfg) -> EnvSpace:
    """The spaces of a Config's env as its workers make it (preprocessing included)."""
    import_packages(cfg.gym_packages)
    return probe_space(cfg.env, cfg.vectorization, atari.Preprocess.of(cfg),
                       not cfg.ignore_action_mask, cfg.observe_action_mask, cfg.text_obs)


def configured_space(venv: gym.vector.VectorEnv, cfg) -> EnvSpace:
    """space_of with a Config's action-mask settings."""
    return space_of(venv, cfg.env, not cfg.ignore_action_mask, cfg.observe_action_mask,
                    cfg.text_obs)


def probe_space(env: str, vectorization: str = "auto",
                preprocess: atari.Preprocess | None = None, use_mask: bool = True,
                observe_mask: bool = False, text_obs: str = "drop") -> EnvSpace:
    """Make a one-env vector env just long enough to read its spaces (space_of)."""
    venv = make_vector_env(env, 1, "sync" if vectorization == "async" else vectorization, preprocess)
    try:
        return space_of(venv, env, use_mask, observe_mask, text_obs)
    finally:
        venv.close()
