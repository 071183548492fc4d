"""Self-play's opponents in a worker: the frozen earlier versions of the policy.

The driver keeps the pool (training/selfplay.py) and sends it with every Weights bundle,
each frozen version's parts under `opponent.v<version>/`. `OpponentPool` keeps a NumPy
Policy per version it has been sent (building one only for a version new to it), and
is what the worker hands its SelfPlayVectorEnv as `opponents`: each game draws one of
the pool's versions uniformly from its copy's stream, and the opponents of all copies
whose turn it is move in one forward pass per version, actions sampled as the policy
samples its own. No TensorFlow or Ray here.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.acting.policy import Policy
from distributed_ac.core.batch import Weights
from distributed_ac.core.policies import policy_weights
from distributed_ac.envs import games
from distributed_ac.envs.space import EnvSpace
from distributed_ac.models.spec import ModelSpec

PREFIX = "opponent.v"


def pool_names(weights: Weights) -> list[str]:
    """The frozen versions a bundle carries, oldest first (`opponent.v<version>`)."""
    names = {n.split("/", 1)[0] for n in weights.parts if n.startswith(PREFIX)}
    return sorted(names, key=lambda n: int(n[len(PREFIX):]))


class OpponentPool:
    def __init__(self, space: EnvSpace, spec: ModelSpec):
        self.space, self.spec = space, spec
        self.policies: dict[str, Policy] = {}
        self.names: list[str] = []

    def load(self, weights: Weights) -> None:
        """Take the pool a bundle carries (versions no longer in it are let go)."""
        names = pool_names(weights)
        if names == self.names:
            return
        for name in names:
            if name not in self.policies:
                policy = Policy(self.space, self.spec)
                policy.load(policy_weights(weights, name))
                self.policies[name] = policy
        self.policies = {n: self.policies[n] for n in names}
        self.names = names

    def draw(self, rng: np.random.Generator) -> int:
        """The pool index of a new game's opponent; -1 (random moves) for the games
        started before the first bundle arrived (the envs' first reset)."""
        return int(rng.integers(len(self.names))) if self.names else -1

    def act(self, obs: dict, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each row's move by its opponent (`ids`: pool indices), sampled."""
        n = len(ids)
        x, legal = self.space.as_batch(obs, n), self.space.action_masks(obs, n)
        out = np.zeros(n, np.int64)
        for k in np.unique(ids):
            rows = np.flatnonzero(ids == k)
            if k < 0:
                out[rows] = games.random_moves(np.asarray(obs["action_mask"])[rows], rng)
                continue
            pick = lambda a: a[rows]  # noqa: E731
            sub = {key: pick(v) for key, v in x.items()} if isinstance(x, dict) else pick(x)
            _, action, _ = self.policies[self.names[k]].act(
                sub, rng, legal=None if legal is None else legal[rows])
            out[rows] = action
        return out
