"""Self-play's opponents in a worker: the frozen earlier versions of the policy.

The driver keeps the pool (training/opponent_pool.py) and sends it with every Weights bundle,
each frozen version's parts under `opponent.v<version>/`. `OpponentPool` keeps a NumPy
Policy per version it has been sent (building one only for a version new to it), and
is what the worker hands its SelfPlayVectorEnv as `opponents`: each game draws one of
the pool's versions uniformly from its copy's stream, and the opponents of all copies
whose turn it is move in one forward pass per version, actions sampled as the policy
samples its own. A game holds the version it drew (its number, not a place in the pool's
list) to its end: a version the driver's pool has dropped stays here, retired, until
no game in progress plays it. No TensorFlow or Ray here.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.acting.numpy_policy import Policy
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


def version_of(name: str) -> int:
    return int(name[len(PREFIX):])


class OpponentPool:
    def __init__(self, space: EnvSpace, spec: ModelSpec):
        self.space, self.spec = space, spec
        self.policies: dict[int, Policy] = {}  # by version: the pool's and the retired
        self.names: list[str] = []
        self.versions: list[int] = []  # the pool's, oldest first: what a new game draws from

    def load(self, weights: Weights) -> None:
        """Take the pool a bundle carries. A version no longer in it is retired: new
        games no longer draw it, the games that drew it play it out (`release`)."""
        names = pool_names(weights)
        if names == self.names:
            return
        for name in names:
            if version_of(name) not in self.policies:
                policy = Policy(self.space, self.spec)
                policy.load(policy_weights(weights, name))
                self.policies[version_of(name)] = policy
        self.names, self.versions = names, [version_of(n) for n in names]

    def draw(self, rng: np.random.Generator) -> int:
        """The version a new game's opponent plays for the whole game, drawn uniformly
        from the pool; -1 (random moves) for the games started before the first bundle
        arrived (the envs' first reset)."""
        return self.versions[int(rng.integers(len(self.versions)))] if self.versions else -1

    def release(self, playing: np.ndarray) -> None:
        """Let go of the retired versions that no game in `playing` (every copy's
        opponent) plays any more."""
        keep = set(self.versions) | set(np.asarray(playing).tolist())
        self.policies = {v: p for v, p in self.policies.items() if v in keep}

    def policy(self, version: int) -> Policy:
        """The frozen policy that plays `version` (what `draw` gave a game)."""
        return self.policies[version]

    def act(self, obs: dict, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each row's move by its opponent (`ids`: versions, -1 random), sampled."""
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
            _, action, _ = self.policy(int(k)).act(
                sub, rng, legal=None if legal is None else legal[rows])
            out[rows] = action
        return out
