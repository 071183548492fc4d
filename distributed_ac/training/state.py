"""The driver's state between updates: what it counts, the recent episodes, the reseed
stream. All of it is checkpointed: RunState saves and restores itself (as arrays in a
TrainState of variables, which the Checkpointer writes)."""

from __future__ import annotations

import dataclasses

import numpy as np

from distributed_ac.config.schema import Config
from distributed_ac.core.rng import generator_words, set_generator_words
from distributed_ac.run.metrics import EpisodeStats


@dataclasses.dataclass
class Counters:
    """What the driver counts. All of it is checkpointed, so a resumed run continues it."""

    env_steps: int = 0  # env steps the learner trained on (applied updates only)
    updates: int = 0  # applied updates (one skipped for a non-finite loss is not one)
    batches: int = 0  # worker batches received, used or not
    dropped_batches: int = 0
    nonfinite_batches: int = 0
    max_lag: int = 0
    worker_restarts: int = 0
    worker_wait_s: float = 0.0  # summed over workers: idle between batches (backpressure)
    wall_s: float = 0.0  # training seconds, summed over every session of the run


@dataclasses.dataclass
class RunState:
    """The driver's whole state between updates."""

    counters: Counters
    stats: EpisodeStats
    reseed_rng: np.random.Generator  # draws the worker seeds when a Ray run resumes
    _mirror: object = dataclasses.field(default=None, repr=False)  # its TrainState

    @staticmethod
    def fresh(cfg: Config) -> "RunState":
        return RunState(Counters(), EpisodeStats(100), np.random.default_rng([cfg.seed, 1]))

    def checkpoint_object(self):
        """The variables a checkpoint holds of this state (made once, captured per save)."""
        if self._mirror is None:
            # here, not at the top: the driver imports this module before TensorFlow,
            # which the learner's thread loads while Ray starts (startup.py)
            from distributed_ac.run.checkpoint import TrainState

            self._mirror = TrainState(self.arrays())
        return self._mirror

    def before_save(self) -> None:
        self.checkpoint_object().capture(self.arrays())

    def after_restore(self) -> None:
        self.load_arrays(self.checkpoint_object().values())

    def draw_seeds(self, n: int) -> list[int]:
        return [int(x) for x in self.reseed_rng.integers(0, 2**31, size=n)]

    def arrays(self) -> dict:
        """The whole state as NumPy values of fixed shape (what a checkpoint stores)."""
        c, stats = self.counters, self.stats
        window, n = stats.returns.maxlen, len(stats.returns)
        return {"counters": {f.name: (np.float64 if isinstance(f.default, float) else np.int64)(
                    getattr(c, f.name)) for f in dataclasses.fields(c)},
                "episodes": np.int64(stats.episodes), "recent_count": np.int64(n),
                "recent_returns": np.pad(np.asarray(stats.returns, np.float64), (0, window - n)),
                "recent_lengths": np.pad(np.asarray(stats.lengths, np.int64), (0, window - n)),
                "reseed_rng": generator_words(self.reseed_rng)}

    def load_arrays(self, a: dict) -> None:
        """The inverse of arrays()."""
        for name, value in a["counters"].items():
            setattr(self.counters, name, type(getattr(self.counters, name))(value))
        n = int(a["recent_count"])
        self.stats.returns.clear()
        self.stats.lengths.clear()
        self.stats.returns.extend(np.asarray(a["recent_returns"])[:n].tolist())
        self.stats.lengths.extend(np.asarray(a["recent_lengths"])[:n].tolist())
        self.stats.episodes = int(a["episodes"])
        set_generator_words(self.reseed_rng, a["reseed_rng"])
