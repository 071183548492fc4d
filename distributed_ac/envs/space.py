"""EnvSpace: the small, picklable description of an env's spaces that the learner, the
policy and the export need, so none of them has to hold an environment; `space_of` reads
(and checks) one from a vector env's single spaces.

Observations: a Box that structured.image_shape reads as an image (rank 3 as (H, W, C),
a rank-2 uint8 or bool frame as one channel) keeps its dtype when it is uint8 (Atari
frames: 84 x 84 x 4) all the way to the learner's graph, which scales it by 1/255; any
other Box is flattened to float32 [obs_dim] for an MLP. Dict, Tuple, Discrete,
MultiDiscrete, MultiBinary and Text observations are read as structured.py says.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from distributed_ac.core.errors import EnvError
from distributed_ac.envs import structured
from distributed_ac.envs.multiagent import ParallelVectorEnv


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
    # rows each sub-env adds to a batch: a PettingZoo env's possible agents
    # (envs/multiagent.py), 1 for a Gymnasium env; what the run plan counts samples by
    agents: int = 1
    agent_names: tuple[str, ...] = ()  # possible_agents, in their rows' order
    # critic_input state or joint: the width of the critic's float32 input rows
    # (envs/central.py); 0 = the critic reads the observation, as the actor
    critic_width: int = 0

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


def space_of(venv: gym.vector.VectorEnv, env: str, use_mask: bool = True,
             observe_mask: bool = False, text_obs: str = "drop") -> EnvSpace:
    """Describe (and check) a vector env's single observation and action spaces; with
    use_mask False an action_mask is read past (the policy acts as if every action were
    allowed); with observe_mask the networks read it too, as observation entries;
    text_obs: how text entries are read (structured.py)."""
    obs_space, act_space = venv.single_observation_space, venv.single_action_space
    parts = structured.split(obs_space, act_space, env, observe_mask, text_obs)
    space = _space(parts.obs_space if parts else obs_space, act_space, env)
    if isinstance(venv.unwrapped, ParallelVectorEnv):
        space = dataclasses.replace(space, agents=venv.unwrapped.num_agents,
                                    agent_names=tuple(map(str, venv.unwrapped.agents)),
                                    critic_width=venv.unwrapped.critic_width)
        if venv.unwrapped.padded_actions and not use_mask:
            raise EnvError(f"'{env}': its agents' Discrete actions are padded to one space "
                           "with the choices an agent lacks masked out; ignore_action_mask "
                           "would let a policy pick them")
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
