"""The centralised critic's input (Config.critic_input), made beside the agents' rows.

A PettingZoo env's rows (envs/multiagent.py) each hold one agent's own observation,
which is all the actor reads. With critic_input state or joint the vector env also
gives, in every reset's and step's info under CRITIC_KEY, float32 [rows, width]: what
each row's critic reads at the observation returned.

- state: the copy's global state (PettingZoo's `state()`, flattened as its
  `state_space` says), the same for every agent of the copy;
- joint: every agent's observation as its row holds it (padded where the agents'
  spaces differ; zeros for an agent not alive), flattened, concatenated in
  possible_agents order;

each followed by the one-hot of the row's own agent index, so one critic shared by the
agents can value each agent's (different) return from the same input. The rows are
float32 vectors whatever the observations are (gymnasium's `flatten`: Discrete
entries one-hot, an action_mask as 0/1), read by an MLP. No TensorFlow or Ray here.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from distributed_ac.core.errors import EnvError

CRITIC_KEY = "critic_obs"
MODES = ("state", "joint")


def state_space_of(penv) -> gym.Space | None:
    """The env's `state_space`, or None where it has none (PettingZoo's ParallelEnv
    defines `state()` to raise, and no state_space)."""
    try:
        return getattr(penv, "state_space", None)
    except (AttributeError, NotImplementedError):  # wrappers forward the lookup
        return None


def resolved_mode(mode: str, penv, name: str) -> str:
    """critic_input as the env can give it: central = state where the env has a
    state_space, else joint; state on an env without one is refused."""
    space = state_space_of(penv)
    if mode == "central":
        return "state" if space is not None else "joint"
    if mode == "state" and space is None:
        raise EnvError(f"critic_input state: '{name}' has no state_space (PettingZoo's "
                       "state()); use critic_input joint (or central)")
    return mode


class CriticInput:
    """Assembles CRITIC_KEY's rows for `copies` copies of an env of `agents` agents whose
    rows' own observations are of `row_space` (module docstring)."""

    def __init__(self, mode: str, first, row_space: gym.Space, agents: int, copies: int,
                 name: str):
        if agents < 2:
            raise EnvError(f"critic_input {mode} is for envs of several agents; '{name}' "
                           f"has {agents} (use critic_input own)")
        self.mode = resolved_mode(mode, first, name)
        self.row_space, self.agents = row_space, agents
        self._state_space = state_space_of(first) if self.mode == "state" else None
        inner = (gym.spaces.flatdim(self._state_space) if self.mode == "state"
                 else agents * gym.spaces.flatdim(row_space))
        self.width = inner + agents
        # each row's own agent id, one-hot, copy by copy
        self._ids = np.tile(np.eye(agents, dtype=np.float32), (copies, 1))

    def rows(self, penvs: list, own_rows: list) -> np.ndarray:
        """[copies x agents, width] for the copies `penvs` as they are now, whose rows'
        own observations are `own_rows` (one per row, copy by copy)."""
        if self.mode == "state":
            per_copy = np.stack([self._state(penv) for penv in penvs])
        else:
            flat = np.stack([gym.spaces.flatten(self.row_space, o) for o in own_rows])
            per_copy = flat.reshape(len(penvs), -1)
        shared = np.repeat(per_copy.astype(np.float32, copy=False), self.agents, axis=0)
        return np.concatenate([shared, self._ids[:len(shared)]], axis=1)

    def _state(self, penv) -> np.ndarray:
        state = gym.spaces.flatten(self._state_space, penv.state())
        if state.shape != (self.width - self.agents,):
            raise EnvError(f"state() gave {state.size} numbers; its state_space "
                           f"{self._state_space} flattens to {self.width - self.agents}")
        return state
