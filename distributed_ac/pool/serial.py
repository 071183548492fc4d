"""SerialPool: the Pool over in-process RolloutWorkers, for debugging and exact resume."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from distributed_ac.acting.evaluation import Evaluator
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.plan import RunPlan
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.pool.base import OneAtATime

log = logging.getLogger(__name__)


class SerialPool:
    """The Pool over in-process RolloutWorkers: no Ray, deterministic.

    Submitted work is queued and run, in submission order, when wait() asks for it. The
    pool also keeps what makes an exact resume possible without ever restarting an env:
    every action each worker has taken since it was built (see `replay_state`)."""

    def __init__(self, cfg: Config, plan: RunPlan):
        self.cfg, self.plan = cfg, plan
        self.workers = [RolloutWorker(cfg, i, limit_cpus=False, num_envs=n,
                                      first_env=plan.first_env(i))
                        for i, n in enumerate(plan.envs)]
        self._queue: list[tuple[int, Weights]] = []
        self._actions: list[list[np.ndarray]] = [[] for _ in self.workers]
        self.restarts = 0  # in-process workers are never replaced

    def __len__(self) -> int:
        return len(self.workers)

    def placement(self, stopped=lambda: False) -> list[dict]:
        return [{**w.info(), "node_ip": "in-process", "node": "local"} for w in self.workers]

    def learner_node(self) -> str:
        return "this process"

    def publish(self, weights: Weights) -> Weights:
        return weights

    def submit(self, worker: int, weights: Weights) -> None:
        self._queue.append((worker, weights))

    def wait(self, num: int, resubmit: Weights | None = None,
             stopped=lambda: False) -> list[Batch]:
        batches = []
        for _ in range(num):
            if stopped():
                break
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

    def save_state(self) -> dict[str, np.ndarray]:
        return self.replay_state()

    def resume(self, saved: dict[str, np.ndarray] | None, draw_seeds) -> None:
        """Replay the saved workers' actions when they fit this pool; else new seeds."""
        saved_workers = sum(k.endswith("_actions") for k in saved) if saved else 0
        if saved and saved_workers != len(self.workers):
            log.warning("the checkpoint holds %d workers, this run has %d: their envs restart "
                        "from new seeds", saved_workers, len(self.workers))
        elif saved and not all(np.shape(saved[f"worker_{i}_rng"]) == (w.num_envs, 6)
                               for i, w in enumerate(self.workers)):
            # a checkpoint written before each sub-env had a sampling stream of its own
            log.warning("the checkpoint holds one sampling stream per worker, not per "
                        "sub-env: the workers' envs restart from new seeds")
        elif saved:
            self.restore_replay_state(saved)
            return
        self.reseed(draw_seeds(len(self.workers)))

    def replay_state(self) -> dict[str, np.ndarray]:
        """Per worker: its sampling streams' states and every action it took since built.

        Envs cannot be saved in general, but every Gymnasium env is a deterministic
        function of its seed and its actions: a fresh worker (same seed) that re-steps
        these actions holds the very env states, episode returns and reset flags the
        saved one had. Actions cost 4 bytes a discrete step; nothing is ever restarted.
        A recurrent policy's state (which the replay does not rebuild: that would take
        every past version's weights) is saved as it stands."""
        from distributed_ac.core.rng import generator_words

        state = {}
        for i, w in enumerate(self.workers):
            if len(self._actions[i]) > 1:  # joined once: the next save adds only new steps
                self._actions[i] = [np.concatenate(self._actions[i])]
            acts = self._actions[i]
            state[f"worker_{i}_actions"] = acts[0] if acts else w.empty_actions()
            state[f"worker_{i}_rng"] = np.stack([generator_words(g) for g in w.streams])
            state.update({f"worker_{i}_core_{k}": a for k, a in w.core_state_arrays().items()})
        return state

    def restore_replay_state(self, state: dict[str, np.ndarray]) -> None:
        """Bring fresh workers to the saved ones' state (the inverse of replay_state)."""
        from distributed_ac.core.rng import set_generator_words

        for i, w in enumerate(self.workers):
            actions = state[f"worker_{i}_actions"]
            w.replay(actions)
            for gen, words in zip(w.streams, state[f"worker_{i}_rng"]):
                set_generator_words(gen, words)
            prefix = f"worker_{i}_core_"
            if w.policy.state:
                w.set_core_state({k[len(prefix):]: a for k, a in state.items()
                                  if k.startswith(prefix)})
            self._actions[i] = [actions] if len(actions) else []

    def evaluation(self) -> "ThreadEvaluation":
        return ThreadEvaluation(self.cfg)

    def close(self) -> None:
        for w in self.workers:
            w.close()


class ThreadEvaluation(OneAtATime):
    """pool/base.py's Evaluation on a thread of this process: the driver loop goes on
    while it plays.

    The Evaluator (NumPy and its own env) shares nothing with the workers or the learner,
    so a serial run trains the same with evaluation on as with it off."""

    def __init__(self, cfg: Config):
        self._stop = threading.Event()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="evaluation")
        # made on the thread as well: the env's start-up is not the driver's time either
        self._evaluator: Future = self._thread.submit(Evaluator, cfg, stop=self._stop)
        self._flight: Future | None = None

    def start(self, weights: Weights, episodes: int, deterministic: bool) -> None:
        assert self._flight is None, "one evaluation at a time"
        self._flight = self._thread.submit(
            lambda: self._evaluator.result().evaluate(weights, episodes, deterministic))

    def _done(self, flight: Future) -> bool:
        return flight.done()

    def _take(self, flight: Future) -> dict:
        try:
            return flight.result()
        except Exception as e:  # an env that fails here fails the evaluation, not the run
            return {"error": f"{type(e).__name__}: {e}"}

    def close(self) -> None:
        self._stop.set()
        self._thread.shutdown(wait=True, cancel_futures=True)
        if self._evaluator.done() and self._evaluator.exception() is None:
            self._evaluator.result().close()
