"""Agents whose spaces differ, as rows of one batch: every observation zero-padded to the
widest agent's, and Discrete actions to the most choices any agent has, the choices an
agent lacks masked out (illegal), so no policy ever picks them.

This is SuperSuit's `pad_observations` and `pad_action_space` (the way PettingZoo's
docs let one network read heterogeneous agents), except that the padded actions are
made illegal through the action mask instead of being passed to the env. With
separate policies (`policy_mapping`) each policy reads its agents' padded observations,
whose padding is always 0; with one shared policy the agent-id one-hot tells the
agents apart as before.

Observations must all be Box of one rank (vectors, or images of one channel layout),
actions all Discrete (any number of choices, start 0) or all the same space; anything
else is refused in one line. No TensorFlow or Ray here.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from distributed_ac.core.errors import EnvError


@dataclasses.dataclass(frozen=True)
class Padding:
    """The rows' padded spaces, and each agent's own sizes (by its index in the rows)."""

    obs_space: gym.spaces.Box
    act_space: gym.Space
    obs_shapes: tuple[tuple[int, ...], ...]
    choices: tuple[int, ...] | None  # each agent's Discrete n; None: one action space

    def obs(self, j: int, o) -> np.ndarray:
        """Agent j's observation at the padded shape, zeros where its own ends."""
        out = np.zeros(self.obs_space.shape, self.obs_space.dtype)
        out[tuple(slice(0, n) for n in self.obs_shapes[j])] = o
        return out

    def masks(self) -> np.ndarray:
        """[agents, n] action masks (1 = the agent has that action), int8."""
        n = int(self.act_space.n)
        return np.array([np.arange(n) < k for k in self.choices], np.int8)

    def action(self, j: int, a, agent: str):
        """Agent j's action for its own space; one it lacks is an EnvError (only a run
        that reads past the mask can pick one)."""
        if self.choices is not None and not 0 <= int(a) < self.choices[j]:
            raise EnvError(f"agent '{agent}' was given action {int(a)} but has "
                           f"{self.choices[j]}: the padded actions are masked, so leave "
                           "ignore_action_mask off")
        return a


def padding_for(obs_spaces: list, act_spaces: list, names: list[str], env: str) -> Padding:
    """The Padding that puts these agents' spaces (in row order) into one row's spaces,
    or an EnvError naming why they cannot share one."""
    _check_obs(obs_spaces, names, env)
    rank = len(obs_spaces[0].shape)
    shape = tuple(max(s.shape[d] for s in obs_spaces) for d in range(rank))
    dtype = np.result_type(*(s.dtype for s in obs_spaces))
    low = _padded(obs_spaces, shape, dtype, "low", np.fmin)
    high = _padded(obs_spaces, shape, dtype, "high", np.fmax)
    obs_space = gym.spaces.Box(low, high, shape, dtype)
    shapes = tuple(s.shape for s in obs_spaces)
    if len({one_line(a) for a in act_spaces}) == 1:
        return Padding(obs_space, act_spaces[0], shapes, None)
    if not all(isinstance(a, gym.spaces.Discrete) and int(a.start) == 0 for a in act_spaces):
        kinds = ", ".join(f"{n}: {a}" for n, a in zip(names, act_spaces))
        raise EnvError(f"'{env}': the agents' action spaces differ ({kinds}); only Discrete "
                       "actions (start 0) can be padded to one space, as masked choices")
    choices = tuple(int(a.n) for a in act_spaces)
    return Padding(obs_space, gym.spaces.Discrete(max(choices)), shapes, choices)


def _check_obs(spaces: list, names: list[str], env: str) -> None:
    boxes = all(isinstance(s, gym.spaces.Box) for s in spaces)
    if not boxes or len({len(s.shape) for s in spaces}) != 1:
        kinds = ", ".join(f"{n}: {s}" for n, s in zip(names, spaces))
        raise EnvError(f"'{env}': the agents' observation spaces differ ({kinds}); only Box "
                       "observations of one rank can be zero-padded to one space")


def _padded(spaces: list, shape, dtype, bound: str, combine) -> np.ndarray:
    """The padded Box's low or high: each entry combined (np.fmin or np.fmax) over the
    agents that have it, 0 where none does."""
    out = np.full(shape, np.nan)
    for s in spaces:
        own = np.full(shape, np.nan)
        own[tuple(slice(0, n) for n in s.shape)] = getattr(s, bound)
        out = combine(out, own)  # fmin / fmax pass over NaN, the entries an agent lacks
    return np.where(np.isnan(out), 0.0, out).astype(dtype)


def one_line(space: gym.Space) -> str:
    """A space as one line of text: what tells two agents' spaces equal, and names them."""
    return " ".join(str(space).split())
