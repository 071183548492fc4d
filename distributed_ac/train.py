"""The driver loop, top to bottom. Serial and Ray modes run the same loop over a pool.

    publish weights -> workers collect -> wait (all: sync / first: async) -> drop stale
    batches -> learner.step -> publish new weights -> resubmit

In async mode a worker is handed the newest published weights the moment its batch
arrives, before the learner trains on that batch, so sampling and learning overlap;
the resulting policy lag is measured per batch and corrected in the learner.

Around the loop, in plain Python (never inside the tf.function): a metrics row every
`log_every_s`, a checkpoint every `checkpoint_every` updates, after which every worker
is reseeded from the driver's reseed Generator (checkpoint.py says why that makes a
resume exact), and SIGINT / SIGTERM, which end the loop after the current update with
a final checkpoint.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import signal
import sys
import threading
import time

import numpy as np

from distributed_ac import rundir
from distributed_ac.address import check_address
from distributed_ac.batch import Batch, Weights
from distributed_ac.config import Config
from distributed_ac.envs import probe_space
from distributed_ac.errors import NonFiniteLossError, RunStopped
from distributed_ac.metrics import ConsoleProgress, EpisodeStats, Interval, MetricsLog
from distributed_ac.rollout import RolloutWorker

log = logging.getLogger(__name__)


class SerialPool:
    """The RayPool interface over in-process RolloutWorkers (no Ray, deterministic)."""

    def __init__(self, cfg: Config, num_workers: int):
        self.workers = [RolloutWorker(cfg, i, limit_cpus=False) for i in range(num_workers)]
        self._queue: list[tuple[int, Weights]] = []
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

    def wait(self, num: int) -> list[Batch]:
        taken, self._queue = self._queue[:num], self._queue[num:]
        return [self.workers[i].collect(w) for i, w in taken]

    def reseed(self, seeds: list[int]) -> None:
        for w, seed in zip(self.workers, seeds):
            w.reseed(seed)

    def close(self) -> None:
        for w in self.workers:
            w.close()


@dataclasses.dataclass
class Counters:
    """What the driver counts. All of it is checkpointed, so a resumed run continues it."""

    env_steps: int = 0
    updates: int = 0
    dropped_batches: int = 0
    nonfinite_batches: int = 0
    max_lag: int = 0
    worker_restarts: int = 0
    wall_s: float = 0.0  # training seconds, summed over every session of the run


@dataclasses.dataclass
class RunState:
    """The driver's whole state between updates (checkpoint.py mirrors it into tf.Variables)."""

    counters: Counters
    stats: EpisodeStats
    reseed_rng: np.random.Generator  # draws the worker seeds at each checkpoint boundary

    @staticmethod
    def fresh(cfg: Config) -> "RunState":
        return RunState(Counters(), EpisodeStats(100), np.random.default_rng([cfg.seed, 1]))

    def draw_seeds(self, n: int) -> list[int]:
        return [int(x) for x in self.reseed_rng.integers(0, 2**31, size=n)]


class StopSignals:
    """SIGINT / SIGTERM set a flag that the loop checks between updates.

    The first one lets the current update finish and the final checkpoint be written; a
    second Ctrl-C raises KeyboardInterrupt at once. Handlers go in only on the main
    thread (Python allows no other) and the previous ones come back on exit.
    """

    def __init__(self):
        self.received: signal.Signals | None = None
        self._previous: dict = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.received = signal.Signals(signum)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def import_ray(address: str | None):
    """The distributed module, which imports Ray (only when Ray is used)."""
    if not address:
        # Embedded local Ray listens on loopback only. Ray reads this switch when it is
        # imported, and then binds every server (GCS, raylet, workers, agents) to
        # 127.0.0.1, as it does on a laptop; no other machine can join or reach it.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from distributed_ac import distributed

    return distributed


def make_pool(cfg: Config, address: str | None, dashboard: bool):
    if cfg.serial:
        return SerialPool(cfg, cfg.num_workers or 1)
    distributed = import_ray(address)
    distributed.start_ray(address, dashboard,
                          num_cpus=None if address else distributed.local_num_cpus(cfg))
    n = cfg.num_workers or distributed.default_num_workers(cfg, local=not address)
    return distributed.RayPool(cfg, n)


@contextlib.contextmanager
def _without_matplotlib():
    """Keras imports matplotlib (pyplot too: ~0.6 s of the ~3 s TensorFlow import) only
    for image-gallery helpers, inside try/except ImportError; the learner never draws,
    so matplotlib stays hidden while TensorFlow loads and importable again after."""
    if "matplotlib" in sys.modules:
        yield
        return
    sys.modules["matplotlib"] = None  # `import matplotlib...` now raises ImportError
    try:
        yield
    finally:
        if "matplotlib" in sys.modules and sys.modules["matplotlib"] is None:
            del sys.modules["matplotlib"]


def start_pool_and_learner(cfg: Config, space, address: str | None, dashboard: bool):
    """Import TensorFlow, build the Learner and warm its step up on a thread while this
    one starts Ray and the workers: on the 2-core machine the two (~4.5 s each) then
    overlap instead of adding up. Ray stays on the main thread: the servers it starts
    die with the thread that started them (PR_SET_PDEATHSIG), and signals need it too.

    Ray is imported before the thread starts: both imports are mostly Python holding the
    GIL, and alongside TensorFlow's Ray's took 2.2 s instead of 0.6 s and held back
    everything Ray starts (learner and worker ready at 8.2-9.3 s instead of 7.2-8.0 s)."""
    if not cfg.serial:
        import_ray(address)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dac-learner") as ex:
        building = ex.submit(_warm_learner, cfg, space)
        pool = make_pool(cfg, address, dashboard)
        try:
            return pool, building.result()
        except BaseException:
            pool.close()
            raise


def _warm_learner(cfg: Config, space):
    with _without_matplotlib():
        from distributed_ac.learner import Learner

    learner = Learner(cfg, space)
    learner.warm_up()
    return learner


def train(cfg: Config, address: str | None = None, dashboard: bool = False,
          progress: ConsoleProgress | None = None, run_dir: str | os.PathLike | None = None,
          resume: bool = False, overwrite: bool = False) -> dict:
    """Train until the env-step budget, `stop_at_return` or a stop signal; return a summary.

    Everything the run writes goes to `run_dir` (default runs/<env>-<time>); with `resume`,
    the run there continues from its newest checkpoint.
    """
    start = time.monotonic()
    space = probe_space(cfg.env, cfg.vectorization)  # a bad env leaves no run directory behind
    path = run_dir if resume else (run_dir or rundir.default_path(cfg.env))
    # Checked before Ray starts, written only once it is up: a cluster that does not
    # answer leaves no run directory behind, and a run --overwrite replaces stays intact.
    rundir.check_resume(path, cfg) if resume else rundir.check_new(path, overwrite)
    if address:
        check_address(address)  # seconds, where Ray would retry a silent address for minutes
    pool, learner = start_pool_and_learner(cfg, space, address, dashboard)
    try:
        run = rundir.resume_run(path, cfg) if resume else rundir.new_run(path, cfg, overwrite)
        with Trainer(cfg, run, pool, space, resume, progress, learner) as trainer, \
                StopSignals() as stop:
            for info in pool.placement():
                trainer.progress.note(f"worker {info['worker_id']}: pid {info['pid']} on node "
                                      f"{info['node_ip']} ({info['node']}), "
                                      f"{info['rss_mb']:.0f} MB resident")
            try:
                trainer.loop(stop)
            except RunStopped as e:
                trainer.stop_on_error(e)
                raise
            trainer.finish(stop)
    finally:
        pool.close()
    return trainer.summary(time.monotonic() - start, stop)


class Trainer:
    """One session of a run: the loop over pool and learner, and what records it."""

    def __init__(self, cfg: Config, run: rundir.RunDir, pool, space, resume: bool,
                 progress: ConsoleProgress | None, learner=None):
        from distributed_ac.checkpoint import Checkpointer
        from distributed_ac.learner import Learner

        self.cfg, self.run, self.pool = cfg, run, pool
        self.learner = Learner(cfg, space) if learner is None else learner
        self.state = RunState.fresh(cfg)
        self.ckpt = Checkpointer(run, self.learner, self.state, cfg.keep_checkpoints)
        self.resumed_from = self.ckpt.restore() if resume else None
        if resume:  # the same reseed the uninterrupted run did at this boundary
            pool.reseed(self.state.draw_seeds(len(pool)))
        c = self.state.counters
        self.metrics = MetricsLog(run.tensorboard, run.metrics,
                                  resume_at=c.env_steps if resume else None)
        self.interval = Interval()
        self.progress = progress or ConsoleProgress(cfg.total_env_steps, cfg.log_every_s,
                                                    start=c.env_steps)
        self._session = (time.monotonic(), c.env_steps, c.wall_s, c.worker_restarts)
        self._last_row = time.monotonic()
        self.progress.note(f"run directory {run.path}" + (
            f", resumed from {self.resumed_from} at {c.env_steps:,d} env steps" if resume else ""))
        self.progress.note(f"learner on {self.learner.device} at {pool.learner_node()}; "
                           f"{len(pool)} rollout worker(s), {cfg.envs_per_worker} envs each, "
                           f"mode {cfg.mode}")

    def loop(self, stop: StopSignals) -> None:
        cfg, pool, learner, c = self.cfg, self.pool, self.learner, self.state.counters
        per_update = len(pool) if cfg.mode == "sync" else 1
        ref = pool.publish(learner.weights())
        for i in range(len(pool)):
            pool.submit(i, ref)
        while c.env_steps < cfg.total_env_steps and not self.solved() and not stop.received:
            batches = pool.wait(per_update)
            if cfg.mode == "async":  # keep the worker busy while the learner trains
                for b in batches:
                    pool.submit(b.worker_id, ref)
            fresh = _drop_stale(cfg, batches, learner.policy_version, c)
            if fresh:
                self._update(fresh)
                if c.updates % cfg.checkpoint_every == 0:
                    self._checkpoint_and_reseed()
                ref = pool.publish(learner.weights())
            if cfg.mode == "sync":
                for i in range(len(pool)):
                    pool.submit(i, ref)
            self._report()

    def _update(self, fresh: list[Batch]) -> None:
        c = self.state.counters
        lags = [self.learner.policy_version - b.policy_version for b in fresh]
        batch = Batch.concat(fresh)
        metrics = self.learner.step(batch)
        c.updates += 1
        c.env_steps += batch.env_steps
        self.state.stats.add(batch.episode_returns, batch.episode_lengths)
        self.interval.add_update(metrics, lags)
        self.interval.add_episodes(batch.episode_returns, batch.episode_lengths)

    def _checkpoint_and_reseed(self) -> None:
        """Save, then restart every worker from the next seeds (the exact-resume rule)."""
        # A row at the boundary first, so the clock it records is the one the checkpoint
        # keeps: a resume trims rows past the checkpoint and wall_s then never goes back.
        self._report(force=True)
        self.ckpt.save()
        self.pool.reseed(self.state.draw_seeds(len(self.pool)))

    def _tick(self) -> float:
        """Bring the clock and restart counters up to date; return this session's steps/s."""
        t0, steps0, wall0, restarts0 = self._session
        c, elapsed = self.state.counters, time.monotonic() - t0
        c.wall_s = wall0 + elapsed
        c.worker_restarts = restarts0 + self.pool.restarts
        return (c.env_steps - steps0) / max(elapsed, 1e-9)

    def _report(self, force: bool = False) -> None:
        c, sps = self.state.counters, self._tick()
        self.progress.update(c.env_steps, sps, self.state.stats.mean_return, force=force)
        now = time.monotonic()
        if (force or now - self._last_row >= self.cfg.log_every_s) and not self.interval.empty:
            self._last_row = now
            self.metrics.write(c.env_steps, c.updates, c.wall_s,
                               self.interval.scalars(sps, c.dropped_batches, c.worker_restarts))
            self.interval = Interval()

    def finish(self, stop: StopSignals) -> None:
        """The last row and the final checkpoint (also after a stop signal)."""
        if stop.received:
            self.progress.note(f"{stop.received.name}: stopping after this update; "
                               "writing a checkpoint")
        self._report(force=True)
        self.ckpt.save()

    def stop_on_error(self, error: RunStopped) -> None:
        """Workers or the learner cannot go on: keep a usable checkpoint, say which one."""
        self._report(force=True)
        if not isinstance(error, NonFiniteLossError):  # skipped updates left the state good
            self.ckpt.save()
        self.progress.note(f"stopping: {error}; newest checkpoint: {self.ckpt.latest}")

    def __enter__(self) -> "Trainer":
        return self

    def __exit__(self, *exc) -> None:
        # On an error too; no checkpoint then: the state that raised may be the bad one.
        self.metrics.close()
        self.progress.close()

    def solved(self) -> bool:
        stats, target = self.state.stats, self.cfg.stop_at_return
        return target is not None and stats.full and stats.mean_return >= target

    def summary(self, wall: float, stop: StopSignals) -> dict:
        cfg, c, stats = self.cfg, self.state.counters, self.state.stats
        new_steps = c.env_steps - self._session[1]
        return {"env": cfg.env, "mode": cfg.mode, "topology": cfg.topology,
                "env_steps": c.env_steps, "updates": c.updates, "episodes": stats.episodes,
                "mean_return_100": stats.mean_return,
                "solved": self.solved() if cfg.stop_at_return is not None else None,
                "dropped_batches": c.dropped_batches, "max_policy_lag": c.max_lag,
                "worker_restarts": c.worker_restarts, "nonfinite_batches": c.nonfinite_batches,
                "skipped_updates": self.learner.skipped_updates,
                "wall_s": round(wall, 3), "steps_per_s": round(new_steps / wall, 1),
                "run_dir": str(self.run.path), "checkpoint": self.ckpt.latest,
                "stopped_by": stop.received.name if stop.received else None}


def _drop_stale(cfg: Config, batches: list[Batch], version: int, counters: Counters) -> list[Batch]:
    """Keep finite batches within max_policy_lag of the learner's version; count the rest."""
    fresh = []
    for b in batches:
        lag = version - b.policy_version
        counters.max_lag = max(counters.max_lag, lag)
        if b.nonfinite:  # on_nonfinite = drop: the worker flagged it; never train on it
            log.warning("dropping a batch: %s", b.nonfinite)
            counters.dropped_batches += 1
            counters.nonfinite_batches += 1
        elif lag > cfg.max_policy_lag:
            counters.dropped_batches += 1
        else:
            fresh.append(b)
    return fresh
