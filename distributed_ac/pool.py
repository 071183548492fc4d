"""The Pool the driver loop runs on, and SerialPool, its in-process implementation.

train.Trainer drives any Pool through these calls and nothing else; distributed.RayPool
is the one over Ray actors. A Pool owns W RolloutWorkers, each with at most one
collect() in flight:

    ref = pool.publish(weights)       # once per version; returns what submit() hands on
    pool.submit(i, ref)               # worker i collects one batch with those weights
    batches = pool.wait(B, resubmit)  # the next B whole batches, in arrival order; each
                                      # worker that delivered gets `resubmit` at once
    pool.reseed(seeds)                # restart every worker's envs (resume only)
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from distributed_ac.batch import Batch, Weights
from distributed_ac.config import Config
from distributed_ac.plan import RunPlan
from distributed_ac.rollout import RolloutWorker

WeightsRef = Any  # a Weights bundle, or a handle to one (a Ray ObjectRef)


class Pool(Protocol):
    plan: RunPlan
    """The run plan the pool was built for (its workers and each one's sub-envs)."""
    restarts: int
    """Workers replaced after dying or failing, this session."""

    def __len__(self) -> int: ...

    def placement(self) -> list[dict]:
        """Each worker's worker_id, pid, rss_mb, node_ip and node (waits for all to start)."""

    def learner_node(self) -> str:
        """Where the learner (this process) runs, for the start-up line."""

    def publish(self, weights: Weights) -> WeightsRef:
        """Make a bundle available to the workers; return what submit() hands them."""

    def submit(self, worker: int, weights: WeightsRef) -> None:
        """Start one collect() on `worker` with these weights (it has none in flight)."""

    def wait(self, num: int, resubmit: WeightsRef | None = None) -> list[Batch]:
        """The next `num` whole batches. With `resubmit`, a worker is handed it the moment
        its batch arrives, so it samples while the others are awaited and the learner trains."""

    def idle(self) -> list[int]:
        """The workers with no collect in flight (their batch arrived without a resubmit)."""

    def reseed(self, seeds: list[int]) -> None:
        """Restart worker i's envs and sampling stream from seeds[i]."""

    def close(self) -> None:
        """Stop every worker."""


class SerialPool:
    """The Pool over in-process RolloutWorkers: no Ray, deterministic.

    Submitted work is queued and run, in submission order, when wait() asks for it. The
    pool also keeps what makes an exact resume possible without ever restarting an env:
    every action each worker has taken since it was built (see `replay_state`)."""

    def __init__(self, cfg: Config, plan: RunPlan):
        self.plan = plan
        self.workers = [RolloutWorker(cfg, i, limit_cpus=False, num_envs=n)
                        for i, n in enumerate(plan.envs)]
        self._queue: list[tuple[int, Weights]] = []
        self._actions: list[list[np.ndarray]] = [[] for _ in self.workers]
        self.restarts = 0  # in-process workers are never replaced

    def __len__(self) -> int:
        return len(self.workers)

    def placement(self) -> list[dict]:
        return [{**w.info(), "node_ip": "in-process", "node": "local"} for w in self.workers]

    def learner_node(self) -> str:
        return "this process"

    def publish(self, weights: Weights) -> Weights:
        return weights

    def submit(self, worker: int, weights: Weights) -> None:
        self._queue.append((worker, weights))

    def wait(self, num: int, resubmit: Weights | None = None) -> list[Batch]:
        batches = []
        for _ in range(num):
            worker, weights = self._queue.pop(0)
            batch = self.workers[worker].collect(weights)
            self._actions[worker].append(batch.actions)
            batches.append(batch)
            if resubmit is not None:
                self.submit(worker, resubmit)
        return batches

    def idle(self) -> list[int]:
        queued = {worker for worker, _ in self._queue}
        return [i for i in range(len(self.workers)) if i not in queued]

    def reseed(self, seeds: list[int]) -> None:
        for i, (w, seed) in enumerate(zip(self.workers, seeds)):
            w.reseed(seed)
            self._actions[i] = []

    def replay_state(self) -> dict[str, np.ndarray]:
        """Per worker: its sampling stream's state and every action it took since built.

        Envs cannot be saved in general, but every Gymnasium env is a deterministic
        function of its seed and its actions: a fresh worker (same seed) that re-steps
        these actions holds the very env states, episode returns and reset flags the
        saved one had. Actions cost 4 bytes a discrete step; nothing is ever restarted."""
        from distributed_ac.generators import generator_words

        state = {}
        for i, w in enumerate(self.workers):
            if len(self._actions[i]) > 1:  # joined once: the next save adds only new steps
                self._actions[i] = [np.concatenate(self._actions[i])]
            acts = self._actions[i]
            state[f"worker_{i}_actions"] = acts[0] if acts else w.empty_actions()
            state[f"worker_{i}_rng"] = generator_words(w.rng)
        return state

    def restore_replay_state(self, state: dict[str, np.ndarray]) -> None:
        """Bring fresh workers to the saved ones' state (the inverse of replay_state)."""
        from distributed_ac.generators import set_generator_words

        for i, w in enumerate(self.workers):
            actions = state[f"worker_{i}_actions"]
            w.replay(actions)
            set_generator_words(w.rng, state[f"worker_{i}_rng"])
            self._actions[i] = [actions] if len(actions) else []

    def close(self) -> None:
        for w in self.workers:
            w.close()
