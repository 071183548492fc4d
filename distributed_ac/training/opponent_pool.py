"""Self-play's pool of frozen policies, kept by the driver in the run directory.

Every `snapshot_every` updates (and once at the start, the initial policy) the bundle
the learner publishes is frozen into the pool as `opponents/v<version>.npz`; the newest
`opponent_pool_size` stay, older files are removed. Every bundle the driver publishes
then carries the pool, each version's parts under `opponent.v<version>/`, so each
worker draws its games' opponents from the same versions (acting/opponents.py), on any
node, with no file shared. A resume reads the pool back from the directory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distributed_ac.acting.opponents import PREFIX
from distributed_ac.core.batch import Weights

SEP = "|"  # npz key: <part>|<index of its array>


class SnapshotPool:
    def __init__(self, directory: Path, size: int, every: int):
        self.dir, self.size, self.every = Path(directory), size, every
        self.dir.mkdir(parents=True, exist_ok=True)
        self.frozen: dict[int, dict[str, list[np.ndarray]]] = {}
        for path in sorted(self.dir.glob("v*.npz"), key=_version_of):
            with np.load(path) as f:
                self.frozen[_version_of(path)] = _parts_of(f)
        self._trim()

    def due(self, updates: int) -> bool:
        return not self.frozen or updates % self.every == 0

    def add(self, weights: Weights) -> None:
        """Freeze `weights` into the pool (a version already in it is kept as it is)."""
        if weights.version in self.frozen:
            return
        arrays = {f"{name}{SEP}{i}": a for name, parts in weights.parts.items()
                  if not name.startswith(PREFIX) for i, a in enumerate(parts)}
        np.savez(self.dir / f"v{weights.version}.npz", **arrays)
        self.frozen[weights.version] = {n: list(p) for n, p in weights.parts.items()
                                        if not n.startswith(PREFIX)}
        self._trim()

    def _trim(self) -> None:
        for version in sorted(self.frozen)[:-self.size]:
            del self.frozen[version]
            (self.dir / f"v{version}.npz").unlink(missing_ok=True)

    def attach(self, weights: Weights) -> Weights:
        """`weights` with the pool's parts added."""
        pool = {f"{PREFIX}{v}/{name}": arrays for v, parts in self.frozen.items()
                for name, arrays in parts.items()}
        return Weights(weights.version, weights.target_version, {**weights.parts, **pool})


def _version_of(path: Path) -> int:
    return int(path.stem[1:])


def _parts_of(f) -> dict[str, list[np.ndarray]]:
    parts: dict[str, dict[int, np.ndarray]] = {}
    for key in f.files:
        name, _, i = key.rpartition(SEP)
        parts.setdefault(name, {})[int(i)] = f[key]
    return {name: [arrays[i] for i in sorted(arrays)] for name, arrays in parts.items()}
