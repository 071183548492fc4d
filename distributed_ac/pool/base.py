"""The Pool the driver loop runs on (pool/serial.py's SerialPool is its in-process
implementation, pool/ray_pool.py's RayPool the one over Ray actors), and the Evaluation
it plays episodes with.

training/trainer.py's Trainer drives any Pool through these calls and nothing else.
A Pool owns W RolloutWorkers, each with at most one collect() in flight:

    ref = pool.publish(weights)       # once per version; returns what submit() hands on
    pool.submit(i, ref)               # worker i collects one batch with those weights
    batches = pool.wait(B, resubmit)  # the next B whole batches, in arrival order; each
                                      # worker that delivered gets `resubmit` at once
    pool.save_state(), pool.resume(saved, seeds)   # its part of a checkpoint
    pool.evaluation()                 # an Evaluation: episodes played beside the workers
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import numpy as np

from distributed_ac.config.plan import RunPlan
from distributed_ac.core.batch import Batch, Weights

WeightsRef = Any  # a Weights bundle, or a handle to one (a Ray ObjectRef)


class Pool(Protocol):
    plan: RunPlan
    """The run plan the pool was built for (its workers and each one's sub-envs)."""
    restarts: int
    """Workers replaced after dying or failing, this session."""

    def __len__(self) -> int: ...

    def placement(self, stopped: Callable[[], object] = lambda: None) -> list[dict]:
        """Each worker's worker_id, pid, rss_mb, node_ip and node (waits for all to start;
        raises errors.Interrupted if `stopped()` names a signal meanwhile)."""

    def learner_node(self) -> str:
        """Where the learner (this process) runs, for the start-up line."""

    def publish(self, weights: Weights) -> WeightsRef:
        """Make a bundle available to the workers; return what submit() hands them."""

    def submit(self, worker: int, weights: WeightsRef) -> None:
        """Start one collect() on `worker` with these weights (it has none in flight)."""

    def wait(self, num: int, resubmit: WeightsRef | None = None,
             stopped: Callable[[], object] = lambda: None) -> list[Batch]:
        """The next `num` whole batches. With `resubmit`, a worker is handed it the moment
        its batch arrives, so it samples while the others are awaited and the learner trains.
        Fewer once `stopped()` names a stop signal: the wait ends then."""

    def idle(self) -> list[int]:
        """The workers with no collect in flight (their batch arrived without a resubmit)."""

    def save_state(self) -> dict[str, np.ndarray] | None:
        """What a checkpoint keeps of the workers (plain arrays), or None if nothing."""

    def resume(self, saved: dict[str, np.ndarray] | None,
               draw_seeds: Callable[[int], list[int]]) -> None:
        """Continue from a checkpoint: from `saved` (save_state's arrays, None if there
        were none or they could not be read) where the pool can, else restart worker i's
        envs and sampling stream from the i-th of draw_seeds(W) (the run state's
        checkpointed reseed stream, drawn only then)."""

    def evaluation(self) -> "Evaluation":
        """A new evaluation actor for this pool's config (its own env, not a worker's)."""

    def close(self) -> None:
        """Stop every worker."""


class Evaluation(Protocol):
    """Evaluation episodes played apart from the driver loop, one evaluation at a time:

        evaluation.start(ref, K, deterministic)   # none in flight; returns at once
        evaluation.result()   # None while it plays, then its outcome, once
        evaluation.wait()     # the outcome, blocking (None if none is in flight)

    An outcome is acting.evaluation.Evaluator.evaluate's {"returns", "lengths"}, or
    {"error": one line} when the evaluation failed (the run goes on without it)."""

    def start(self, weights: WeightsRef, episodes: int, deterministic: bool) -> None: ...

    def result(self) -> dict | None: ...

    def wait(self) -> dict | None: ...

    def close(self) -> None:
        """Drop any evaluation under way and release the actor."""


class OneAtATime:
    """The part both Evaluations share: one evaluation in flight (self._flight, set by
    start), `result` looking without waiting and `wait` taking it. A subclass says when
    its flight is done (_done) and how its outcome is read (_take)."""

    _flight = None

    def result(self) -> dict | None:
        if self._flight is None or not self._done(self._flight):
            return None
        return self.wait()

    def wait(self) -> dict | None:
        if self._flight is None:
            return None
        flight, self._flight = self._flight, None
        return self._take(flight)

    def _done(self, flight) -> bool:
        raise NotImplementedError

    def _take(self, flight) -> dict:
        raise NotImplementedError
