"""Separate policies acting in one batch: each a Policy over its agents' rows.

`PolicySet` offers what the rollout worker and the evaluator use of a Policy (act,
rollout_values, the cores' state, load), and hands each policy the columns of its
agents (core/policies.py), scattering the results back into the batch's rows. All
policies read one observation and action space (envs/multiagent.py), so the action
head's kind, its sampling draws and the env's action are the same for every row.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.core.batch import Weights
from distributed_ac.core.obs import leading, tree_map
from distributed_ac.core.policies import PolicyGroups, groups_for, policy_weights
from distributed_ac.envs.space import EnvSpace
from distributed_ac.models.spec import ModelSpec


def policy_for(cfg, space: EnvSpace, spec: ModelSpec | None = None):
    """The worker's policy for a Config: a Policy, or a PolicySet with policy_mapping."""
    spec = spec or ModelSpec.of(cfg, space)
    groups = groups_for(space.agent_names, cfg.policy_mapping, cfg.env)
    return Policy(space, spec) if groups is None else PolicySet(space, spec, groups)


class PolicySet:
    """One Policy per policy of `groups`, each acting for its agents' rows."""

    def __init__(self, space: EnvSpace, spec: ModelSpec, groups: PolicyGroups):
        self.space, self.spec, self.groups = space, spec, groups
        self.policies = {p: Policy(space, spec) for p in groups.names}
        first = next(iter(self.policies.values()))
        self.head, self.cores = first.head, first.cores  # one kind for every policy
        self.weights: Weights | None = None
        self._cols: dict[int, dict[str, np.ndarray]] = {}  # rows -> each policy's columns

    def columns(self, rows: int) -> dict[str, np.ndarray]:
        if rows not in self._cols:
            self._cols[rows] = {p: self.groups.columns(p, rows) for p in self.policies}
        return self._cols[rows]

    def load(self, weights: Weights) -> None:
        for p, policy in self.policies.items():
            policy.load(policy_weights(weights, p))
        self.weights = weights

    def reset_state(self, n: int) -> None:
        for p, cols in self.columns(n).items():
            self.policies[p].reset_state(len(cols))

    @property
    def state(self) -> dict[str, tuple]:
        """Every policy's core state in the batch's rows ({} without a core)."""
        if not self.cores:
            return {}
        parts = next(iter(self.policies.values())).state
        n = sum(len(p.state[next(iter(parts))][0]) for p in self.policies.values())
        out = {name: tuple(np.empty((n, *a.shape[1:]), a.dtype) for a in arrays)
               for name, arrays in parts.items()}
        for p, cols in self.columns(n).items():
            for name, arrays in self.policies[p].state.items():
                for full, a in zip(out[name], arrays):
                    full[cols] = a
        return out

    @state.setter
    def state(self, state: dict[str, tuple]) -> None:
        if not state:
            return
        n = len(next(iter(state.values()))[0])
        for p, cols in self.columns(n).items():
            self.policies[p].state = {name: tuple(a[cols] for a in arrays)
                                      for name, arrays in state.items()}

    def act(self, obs, rng, deterministic: bool = False, starts=None, legal=None, noise=None):
        """Policy.act for every row, each policy on its agents' rows."""
        n = leading(obs)[0]
        out = None
        for p, cols in self.columns(n).items():
            pick = lambda a: None if a is None else a[cols]  # noqa: E731
            stored, _, logp = self.policies[p].act(tree_map(pick, obs), rng, deterministic,
                                                   pick(starts), pick(legal), pick(noise))
            if out is None:
                out = (np.empty((n, *stored.shape[1:]), stored.dtype), np.empty(n, logp.dtype))
            out[0][cols], out[1][cols] = stored, logp
        return out[0], self.head.env_action(out[0]), out[1]

    def rollout_values(self, obs, starts: np.ndarray, critic=None) -> np.ndarray:
        """Policy.rollout_values over [T + 1, N] rows, each policy's V_target on its own."""
        values = np.empty(starts.shape, np.float32)
        for p, cols in self.columns(starts.shape[1]).items():
            values[:, cols] = self.policies[p].rollout_values(
                tree_map(lambda a: a[:, cols], obs), starts[:, cols],
                None if critic is None else critic[:, cols])
        return values

    def rows_without_choice(self, legal: np.ndarray) -> np.ndarray:
        return next(iter(self.policies.values())).rows_without_choice(legal)

    def env_action(self, stored: np.ndarray) -> np.ndarray:
        return self.head.env_action(stored)
