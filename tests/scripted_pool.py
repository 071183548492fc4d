"""A Pool whose workers deliver scripted batches, and the Trainer's loop run over it with a
real Learner and no Ray (tests/unit/test_trainer_loop.py; evaluation during training in
tests/e2e/test_eval_during_training.py): batches are made by the weights each worker was
last given, in an order the test writes down, so lag, drops and resubmission are exact."""

import threading

import numpy as np
from helpers import quiet

from distributed_ac.config.plan import make_plan
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, Weights
from distributed_ac.envs.vector import probe_space
from distributed_ac.run import rundir
from distributed_ac.training.signals import StopSignals
from distributed_ac.training.trainer import Trainer

T, N = 4, 2  # each worker batch: [T, N]

class ScriptedPool:
    """A Pool whose workers deliver in `order` (worker ids, cycled); `poison` lists the
    deliveries (0-based) whose batch carries a non-finite flag."""

    def __init__(self, workers: int, order: list[int], poison=(), episodes_per_batch=1,
                 nan_rewards=()):
        self.n, self.order, self.poison = workers, list(order), set(poison)
        self.nan_rewards = set(nan_rewards)  # deliveries with NaN rewards the worker missed
        self.episodes_per_batch = episodes_per_batch
        self.holding: dict[int, Weights] = {}  # worker -> weights of its collect in flight
        self.log: list[tuple] = []  # ("publish", version) / ("submit", w, v) / ("wait", num, ...)
        self.deliveries = 0
        self.restarts = 0

    def __len__(self):
        return self.n

    def placement(self, stopped=None):
        return []

    def learner_node(self):
        return "test"

    def publish(self, weights):
        self.log.append(("publish", weights.version))
        return weights

    def submit(self, worker, weights):
        assert worker not in self.holding, f"worker {worker} got a second collect in flight"
        self.holding[worker] = weights
        self.log.append(("submit", worker, weights.version))

    def wait(self, num, resubmit=None, stopped=None):
        self.log.append(("wait", num, None if resubmit is None else resubmit.version))
        out = []
        while len(out) < num:
            worker = self.order[self.deliveries % len(self.order)]
            out.append(self._batch(worker, self.holding.pop(worker)))
            self.deliveries += 1
            if resubmit is not None:
                self.submit(worker, resubmit)
        return out

    def _batch(self, worker, weights):
        rng = np.random.default_rng(self.deliveries)
        f32 = np.float32
        zeros = np.zeros((T, N), f32)
        return Batch(obs=rng.standard_normal((T, N, 4)).astype(f32),
                     actions=rng.integers(0, 2, (T, N)).astype(np.int32),
                     rewards=np.full((T, N), np.nan if self.deliveries in self.nan_rewards
                                     else 1.0, f32), terminated=zeros, truncated=zeros,
                     mask=np.ones((T, N), f32), behaviour_logp=np.full((T, N), -0.69, f32),
                     values=np.zeros((T + 1, N), f32), policy_version=weights.version,
                     target_version=weights.target_version, worker_id=worker,
                     episode_returns=np.full(self.episodes_per_batch, float(worker)),
                     episode_lengths=np.full(self.episodes_per_batch, 10, np.int64),
                     episode_ends=np.zeros(self.episodes_per_batch, np.int64),
                     nonfinite="NaN reward" if self.deliveries in self.poison else "")

    def idle(self):
        return [w for w in range(self.n) if w not in self.holding]

    def save_state(self):
        return None

    def resume(self, saved, draw_seeds):
        pass

    def close(self):
        pass


def run_loop(tmp_path, pool, watch=None, **cfg_fields):
    """The loop over `pool` to the budget, in tmp_path/run: on the driver's thread unless
    cfg_fields ask for the learner thread (run_overlapped). watch(trainer), if given, runs
    once the Trainer is built, before the loop starts."""
    cfg = Config(**{"envs_per_worker": N, "rollout_length": T, "hidden_sizes": (8,),
                    "log_every_s": 1e9, "checkpoint_every": 10**6, "learner_thread": False,
                    **cfg_fields})
    space = probe_space(cfg.env, cfg.vectorization)
    run = rundir.new_run(tmp_path / "run", cfg)
    pool.plan = make_plan(cfg, pool.n)
    with Trainer(cfg, run, pool, space, False, quiet(cfg, every_s=1e9)) as trainer:
        if watch is not None:
            watch(trainer)
        trainer.loop(StopSignals())
    return trainer


class OverlapProbe(ScriptedPool):
    """Records, at each wait, whether a learner step was under way on another thread.

    A handshake, not a clock: a step says it has begun (`in_step`) and then holds until
    a wait has seen it (`seen`), so a step that overlaps the driver's next wait is seen
    however late the driver gets there. A wait with no step under way waits for one to
    begin for up to PATIENCE_S and records False; that time is spent only when the
    steps do not overlap the waits (then each step also holds PATIENCE_S in vain)."""

    PATIENCE_S = 10.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.in_step = threading.Event()
        self.seen = threading.Event()
        self.overlapped: list[bool] = []

    def wait(self, num, resubmit=None, stopped=None):
        running = False
        if self.deliveries:  # the first wait has no step to overlap
            running = self.in_step.wait(self.PATIENCE_S)
            if running:
                self.seen.set()
        self.overlapped.append(running)
        return super().wait(num, resubmit, stopped)

    def step_begins(self, wait_to_be_seen: bool):
        """Run by each learner step before it computes: announce the step and, unless no
        wait can come while it runs, hold until one has seen it."""
        self.in_step.set()
        if wait_to_be_seen:
            self.seen.wait(self.PATIENCE_S)
        self.seen.clear()
        self.in_step.clear()


def run_overlapped(tmp_path, pool, **cfg_fields):
    """run_loop in async mode with learner_thread; an OverlapProbe pool watches each
    learner step. Returns the trainer and, step by step, whether it ran on the main thread."""
    threads, stepped = [], [0]

    def watch(trainer):
        step, total = trainer.learner.step, trainer.cfg.total_env_steps

        def watched_step(batch):
            on_main = threading.current_thread() is threading.main_thread()
            threads.append(on_main)
            stepped[0] += batch.env_steps
            if isinstance(pool, OverlapProbe):
                # No wait comes while the main thread itself steps, nor after the step
                # that completes the budget (the loop ends): those need not be seen.
                pool.step_begins(not on_main and stepped[0] < total)
            return step(batch)

        trainer.learner.step = watched_step

    trainer = run_loop(tmp_path, pool, watch, mode="async", learner_thread=True, **cfg_fields)
    return trainer, threads
