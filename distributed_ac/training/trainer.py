"""The driver loop, top to bottom. Serial and Ray modes run the same loop over a Pool.

    publish weights -> workers collect -> wait for B batches -> drop stale ones ->
    learner.step on their concatenation -> publish new weights -> (sync) resubmit all

Sync mode (A2C) waits for a batch from every worker (B = W) made by the same weights.
Async mode (IMPALA-like) gathers the first B batches that arrive into one learner batch,
and each worker is handed the newest published weights the moment its batch arrives, so
sampling and learning overlap; W workers and B batches an update give a policy lag of
about W / B, measured per batch and corrected in the learner (V-trace).

Around the loop, in plain Python (never inside the tf.function): a metrics row every
`log_every_s`, a checkpoint every `checkpoint_every` updates (envs go on: an episode
ends only by the env), an evaluation every `eval_every` updates or env steps (played
beside the loop, never waited for: evaluation.py), and SIGINT / SIGTERM, which end the
loop after the current update with a final checkpoint. Start-up lives in startup.py,
checkpoints in run/checkpoint.py.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import time
from pathlib import Path
from typing import Callable

from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch, episodes_in_order
from distributed_ac.core.errors import NonFiniteError, NonFiniteLossError, RunStopped
from distributed_ac.core.policies import episodes_by_policy, groups_for
from distributed_ac.envs.games import check_greedy
from distributed_ac.envs.vector import reading_lines, resolved, space_for
from distributed_ac.learning.tf_runtime import held_lines
from distributed_ac.models.spec import encoder_for
from distributed_ac.pool.address import check_address
from distributed_ac.pool.base import Pool
from distributed_ac.run import rundir
from distributed_ac.run.files import named
from distributed_ac.run.metrics import (
    LEARNER_KEYS,
    ConsoleProgress,
    Interval,
    MetricsLog,
)
from distributed_ac.run.wandb_sink import WandbSink, require_wandb
from distributed_ac.training import summary
from distributed_ac.training.evaluation import Evaluations
from distributed_ac.training.opponent_pool import SnapshotPool
from distributed_ac.training.signals import Overdue, StopSignals
from distributed_ac.training.startup import check_device, start_pool_and_learner
from distributed_ac.training.state import RunState
from distributed_ac.training.steps import Flight, steps_for

log = logging.getLogger(__name__)

# on_update(row, save): called after every applied update with the run's counters and
# that update's learner metrics (`row`); `save()` writes a checkpoint now and returns its
# path. Hyperparameter search (tuning/) reports to Ray Tune through it. Returning False
# ends the run after this update, as a stop signal does (summary's stopped_by "callback").
UpdateHook = Callable[[dict, Callable[[], str]], "bool | None"]


def train(cfg: Config, address: str | None = None, dashboard: bool = False,
          progress: ConsoleProgress | None = None, run_dir: str | os.PathLike | None = None,
          resume: bool = False, overwrite: bool = False, note: str | None = None,
          on_update: UpdateHook | None = None, learner=None) -> dict:
    """Train until the env-step budget, `stop_at_return` or a stop signal; return a summary.

    Everything the run writes goes to `run_dir` (default runs/<env>-<time>); with `resume`,
    the run there continues from its newest checkpoint. `note` (dac train: the preset the
    config started from) goes to stderr once the checks have passed, so that bad input
    still gets one line. `on_update`: see UpdateHook. `learner`: one already built for
    this config (startup.build_learner), which a resume then restores.
    """
    start = time.monotonic()
    # how its image is read: settled once for every process (a run from before that
    # was settled reads it as it did)
    old = resume and rundir.predates_reading(run_dir)
    cfg, reading = (cfg, reading_lines(cfg)) if old else resolved(cfg)
    space = space_for(cfg)  # a bad env leaves no run directory behind
    groups_for(space.agent_names, cfg.policy_mapping, cfg.env)  # a bad mapping, likewise
    if cfg.self_play and cfg.eval_every and cfg.eval_opponent == "greedy":
        check_greedy(space.obs_shape, cfg.env)  # a game the greedy player cannot play
    encoder_for(cfg, space.obs_shape, space.mixed)  # an encoder that cannot read these observations, likewise
    if cfg.wandb:
        require_wandb()  # not installed: one line, before anything starts
    path = run_dir if resume else (run_dir or rundir.default_path(cfg.env))
    # Held until the run ends (the kernel drops it if this process dies): a second
    # writer, a resume or an --overwrite of a live run, is refused before anything starts.
    with rundir.RunLock(path) as lock:
        # Checked before Ray starts, written only once it is up: a cluster that does not
        # answer leaves no run directory behind, and a run --overwrite replaces stays intact.
        rundir.check_resume(path, cfg) if resume else rundir.check_new(path, overwrite)
        check_device(cfg.device)
        if address:  # seconds, where Ray would retry a silent address for minutes
            address = check_address(address)  # auto: the cluster `ray start` started, or none
        if note:
            print(note, file=sys.stderr, flush=True)
        for line in reading:
            print(line, file=sys.stderr, flush=True)
        if space.dropped:
            print(f"observation entries left out of what the networks read: "
                  f"{', '.join(space.dropped)} (--text-obs hash reads text)", file=sys.stderr,
                  flush=True)
        with StopSignals(cfg.stop_timeout_s) as stop:  # from here on a signal is a flag, acted on at safe points
            trainer = _session(cfg, space, path, lock, stop, address, dashboard, resume,
                               overwrite, progress, learner, on_update)
    return trainer.finish_tracking(trainer.summary(time.monotonic() - start, stop))


def _session(cfg: Config, space, path, lock: rundir.RunLock, stop: StopSignals,
             address: str | None, dashboard: bool, resume: bool, overwrite: bool,
             progress: ConsoleProgress | None, learner, on_update: UpdateHook | None
             ) -> "Trainer":
    """Start the pool and the learner, write the run directory, run the loop; the
    Trainer it ran (its summary still to be made)."""
    pool, learner = start_pool_and_learner(cfg, space, address, dashboard, stop, learner)
    tracking = None  # W&B (--wandb): in the driver only
    try:
        stop.reclaim()
        stop.check_startup()
        # before the run directory is written: a W&B that cannot start leaves none behind
        tracking = WandbSink(cfg, rundir.RunDir(Path(path)), resume) if cfg.wandb else None
        run = (rundir.resume_run(path, cfg) if resume
               else rundir.new_run(path, cfg, overwrite, lock))
        if tracking is not None:
            tracking.keep_id(run)
        run.keep_startup_lines(held_lines())
        with Trainer(cfg, run, pool, space, resume, progress, learner, on_update,
                     tracking) as trainer:
            for info in pool.placement(stop.stopped):
                trainer.progress.note(f"worker {info['worker_id']}: pid {info['pid']} on "
                                      f"node {info['node_ip']} ({info['node']}), "
                                      f"{info['rss_mb']:.0f} MB resident")
            try:
                trainer.loop(stop)
            except RunStopped as e:
                trainer.stop_on_error(e)
                raise
            trainer.finish(stop)
    except BaseException:
        if tracking is not None:
            tracking.finish(None)  # marked failed; a clean end waits for the summary
        raise
    finally:
        pool.close()
    return trainer


class Trainer:
    """One session of a run: the loop over pool and learner, and what records it."""

    def __init__(self, cfg: Config, run: rundir.RunDir, pool: Pool, space, resume: bool,
                 progress: ConsoleProgress | None, learner=None,
                 on_update: UpdateHook | None = None, tracking: WandbSink | None = None):
        from distributed_ac.learning.policy_set import learner_for
        from distributed_ac.run.checkpoint import Checkpointer

        self.cfg, self.run, self.pool = cfg, run, pool
        self.on_update = on_update
        self.hook_stopped = False  # on_update returned False: end the run cleanly
        self.learner = learner_for(cfg, space) if learner is None else learner
        self.plan = pool.plan
        self.num_workers = self.plan.workers
        self.per_update = self.plan.batches_per_update
        # serial runs keep one thread (exact resume); sync mode has nothing to overlap, and
        # with every worker's batch in each update the workers already sample during it
        self.overlap = (cfg.learner_thread and cfg.mode == "async" and not cfg.serial
                        and self.per_update < self.num_workers)
        self.state = RunState.fresh(cfg)
        self.ckpt = Checkpointer(run, self.learner, self.state, cfg.keep_checkpoints, pool)
        self.resumed_from = self.ckpt.restore() if resume else None
        if resume:  # only now: a restore that fails leaves the run directory untouched
            run.write_config(cfg)
        counts = self.state.counters
        self.tracking = tracking  # W&B (--wandb): gets every row, then finish_tracking's summary
        self.metrics = MetricsLog(run.tensorboard, run.metrics,
                                  resume_at=counts.env_steps if resume else None,
                                  sinks=(self.tracking,) if self.tracking else ())
        self.interval = Interval()
        self.lags: collections.Counter = collections.Counter()  # this session's, per batch
        self.nonfinite_streak: collections.Counter = collections.Counter()  # per worker
        self.progress = progress or ConsoleProgress(cfg.total_env_steps, cfg.log_every_s,
                                                    start=counts.env_steps)
        self.snapshots = (SnapshotPool(run.path / "opponents", cfg.opponent_pool_size,
                                       cfg.snapshot_every) if cfg.self_play else None)
        self.evals = (Evaluations(cfg, run, self.learner, pool.evaluation(), self.metrics,
                                  self.progress, counts) if cfg.eval_every else None)
        self._session = (time.monotonic(), counts.env_steps, counts.wall_s, counts.worker_restarts)
        self._last_row = time.monotonic()
        self.progress.note(f"run directory {run.path}" + (
            f", resumed from {self.resumed_from} at {counts.env_steps:,d} env steps" if resume else ""))
        spans = self.learner.plan(self.plan)
        with named(run.plan):  # a full disk: one line naming the file
            self.plan.write(run.plan, **summary.resolved(self.learner))
        for line in summary.start_lines(cfg, self.learner, self.plan, spans, pool.learner_node()):
            self.progress.note(line)

    def loop(self, stop: StopSignals) -> None:
        """Updates until the budget, the target return or a stop signal. With the learner
        thread (self.overlap), update k runs on a thread while the driver waits for,
        screens and joins the batches of update k+1 (IMPALA's learner thread): a worker
        whose batch arrives while a step is under way is handed the weights that step
        makes as soon as it lands, so lag stays what it is without the thread and a
        worker waits at most one step. Without it each step runs here, before the next
        wait. Updates are landed (counted, checkpointed, published) here either way."""
        cfg, pool, learner, counts = self.cfg, self.pool, self.learner, self.state.counters
        sync = cfg.mode == "sync"
        # async with every worker's batch in each update: one batch per worker per round,
        # so a fast worker cannot stand in for a slow one and every batch is exactly one
        # version old, as with one worker (lag 1 at any W)
        rounds = not sync and self.per_update == self.num_workers
        hold = sync or rounds  # workers get new weights only once the update is made
        ref = self._submit_all(self._publish())
        flight: Flight | None = None  # the step under way on the learner thread
        steps = steps_for(self.overlap)
        with steps:
            try:
                while (counts.env_steps + (flight.batch.env_steps if flight else 0) < cfg.total_env_steps
                       and not self.solved() and not stop.received
                       and not self.hook_stopped):
                    # IMPALA (B < W): a worker gets the newest weights the moment its batch arrives
                    batches = self._wait(stop, None if hold or flight else ref)
                    if stop.received:  # what came is left: the run ends at the last update
                        break
                    if rounds:  # they sample with these weights while the learner trains
                        self._submit_all(ref)
                    if hold:  # joined in worker order, not arrival order: a seed then repeats the run
                        batches = sorted(batches, key=lambda b: b.worker_id)
                    fresh = self._screen(batches, flight.version if flight else None)
                    batch = Batch.concat(fresh, same_version=sync) if fresh else None
                    if flight:
                        done, flight = flight, None
                        ref = self._land(done.batch, done.step.result(), ref)
                        for worker in pool.idle():  # held while the step ran
                            pool.submit(worker, ref)
                    if batch is not None:
                        flight = Flight(batch, steps.submit(learner.step, batch),
                                         learner.policy_version + 1)
                        if not self.overlap:  # made already: land it before the next wait
                            done, flight = flight, None
                            ref = self._land(done.batch, done.step.result(), ref)
                    if sync:
                        self._submit_all(ref)
                    self._report()
            finally:  # a stop or an error lands the step under way before anything is saved
                if flight:
                    self._land(flight.batch, flight.step.result(), ref)

    def _wait(self, stop: StopSignals, resubmit) -> list[Batch]:
        """pool.wait for the next update's batches, ended early by a stop signal, or by
        Overdue when a collect still blocks (an env step that hangs) half of
        stop_timeout_s after it."""
        try:
            with stop.abandonable():
                return self.pool.wait(self.per_update, resubmit=resubmit, stopped=stop.stopped)
        except Overdue as e:
            self.progress.note(f"{e}: leaving the collect under way")
            return []

    def _submit_all(self, ref):
        """Start a collect on every worker with `ref`; return it."""
        for i in range(len(self.pool)):
            self.pool.submit(i, ref)
        return ref

    def _screen(self, batches: list[Batch], version: int | None = None) -> list[Batch]:
        """Count every batch and its finished episodes; return those fit to train on.

        Episodes count wherever they end, in a dropped batch too: the env played them.
        A batch is dropped when its worker flagged a NaN/Inf (on_nonfinite = drop) or
        when it is more than max_policy_lag policy versions old, counted against the
        version that will train on it (`version`: given while a step is under way)."""
        counts = self.state.counters
        version = self.learner.policy_version if version is None else version
        ended = episodes_in_order(batches)
        self.state.stats.add(*ended)
        self.interval.add_episodes(*ended)
        groups = getattr(self.learner, "groups", None)
        if groups is not None:
            self.interval.add_policy_episodes(episodes_by_policy(batches, groups))
        fresh, lags = [], []
        for b in batches:
            lag = version - b.policy_version
            lags.append(lag)
            counts.batches += 1
            counts.worker_wait_s += b.idle_s
            counts.max_lag = max(counts.max_lag, lag)
            if b.nonfinite:
                self._drop_nonfinite(b)
                continue
            self.nonfinite_streak[b.worker_id] = 0
            if lag > self.cfg.max_policy_lag:
                counts.dropped_batches += 1
            else:
                fresh.append(b)
        self.interval.add_lags(lags)
        self.lags.update(lags)
        return fresh

    def _drop_nonfinite(self, b: Batch) -> None:
        """Count a batch its worker flagged as non-finite; NonFiniteError once that worker
        has sent max_nonfinite_batches of them in a row (its env stays broken)."""
        streak = self.nonfinite_streak[b.worker_id] = self.nonfinite_streak[b.worker_id] + 1
        if streak >= self.cfg.max_nonfinite_batches:
            raise NonFiniteError(f"{b.nonfinite}; {streak} batches in a row from worker "
                                 f"{b.worker_id} were non-finite (--max-nonfinite-batches)")
        log.warning("dropping a batch: %s", b.nonfinite)
        self.state.counters.dropped_batches += 1
        self.state.counters.nonfinite_batches += 1

    def _land(self, batch: Batch, metrics: dict, ref):
        """Count an update the learner made from `batch` (nothing, if it skipped it for a
        non-finite loss), checkpoint when due, and return the weights to hand out next."""
        if not metrics["applied"]:
            return ref
        counts = self.state.counters
        counts.updates += 1
        counts.env_steps += batch.env_steps
        self.interval.add_update(metrics)
        if counts.updates % self.cfg.checkpoint_every == 0:
            self._report(force=True)  # the row's clock is the one the checkpoint keeps
            self.ckpt.save()
        if self.on_update is not None:
            if self.on_update(self._update_row(metrics), self._save_now) is False:
                self.hook_stopped = True
        ref = self._publish()
        if self.evals is not None:  # here, where no learner step is under way
            self._tick()
            self.evals.after_update(counts, ref)
        return ref

    def _publish(self):
        """Publish the learner's weights (with self-play, freeze them into the opponent
        pool when due and send the pool with them); returns the pool's reference."""
        weights = self.learner.weights()
        if self.snapshots is not None:
            if self.snapshots.due(self.state.counters.updates):
                self.snapshots.add(weights)
            weights = self.snapshots.attach(weights)
        return self.pool.publish(weights)

    def _update_row(self, learner_metrics: dict) -> dict:
        """The counters after an update and its learner metrics, by metrics-row name."""
        self._tick()
        counts = self.state.counters
        last_eval = self.evals.last if self.evals is not None else None
        evaluated = ({f"eval/{k}": last_eval[k] for k in ("mean_return", "std_return",
                                                         "mean_length")}
                     if last_eval is not None else {})  # from the newest evaluation done
        return {"env_steps": counts.env_steps, "updates": counts.updates, "wall_s": counts.wall_s,
                "episodes": self.state.stats.episodes,
                "charts/mean_return_100": self.state.stats.mean_return, **evaluated,
                **{name: learner_metrics[key] for name, key in LEARNER_KEYS.items()
                   if key in learner_metrics}}

    def _save_now(self) -> str:
        """A checkpoint of the state as it is now (the newest one, if already written)."""
        self.ckpt.save()
        return self.ckpt.latest

    def _tick(self) -> float:
        """Bring the clock and restart counters up to date; return this session's steps/s."""
        t0, steps0, wall0, restarts0 = self._session
        counts, elapsed = self.state.counters, time.monotonic() - t0
        counts.wall_s = wall0 + elapsed
        counts.worker_restarts = restarts0 + self.pool.restarts
        return (counts.env_steps - steps0) / max(elapsed, 1e-9)

    def _report(self, force: bool = False) -> None:
        counts, sps = self.state.counters, self._tick()
        self.progress.update(counts.env_steps, sps, self.state.stats.mean_return, force=force)
        now = time.monotonic()
        if (force or now - self._last_row >= self.cfg.log_every_s) and not self.interval.empty:
            self._last_row = now
            self.metrics.write(counts.env_steps, counts.updates, counts.wall_s,
                               self.interval.scalars(sps, counts.dropped_batches, counts.worker_restarts,
                                                     self.state.stats.mean_return))
            self.interval = Interval()

    def finish(self, stop: StopSignals) -> None:
        """The last row and the final checkpoint (also after a stop signal)."""
        if stop.received:
            self.progress.note(f"{stop.received.name}: stopping after this update; "
                               "writing a checkpoint")
        self._report(force=True)
        if self.evals is not None and not stop.received:
            self.evals.finish(self.state.counters,
                              self._publish)
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
        try:
            if self.evals is not None:
                self.evals.close()
            self.metrics.close()
        finally:
            self.progress.close()

    def finish_tracking(self, summary: dict) -> dict:
        """Hand the run's summary to W&B (--wandb) and end its run there; `summary`."""
        if self.tracking is not None:
            self.tracking.finish(summary)
        return summary

    def solved(self) -> bool:
        stats, target = self.state.stats, self.cfg.stop_at_return
        return target is not None and stats.full and stats.mean_return >= target

    def summary(self, wall: float, stop: StopSignals) -> dict:
        cfg, counts, learner = self.cfg, self.state.counters, self.learner
        solved = self.solved() if cfg.stop_at_return is not None else None
        return {**summary.model(cfg, learner.spec),
                **summary.learning(counts, self.state.stats, solved),
                **summary.plan(self.plan, learner.objective.bootstrap_values_from),
                **summary.batches(counts, self.lags, self.num_workers, learner.skipped_updates),
                **summary.session(wall, counts.env_steps - self._session[1], str(self.run.path),
                                  self.ckpt.latest,
                                  stop.received.name if stop.received
                                  else "callback" if self.hook_stopped else None),
                **(self.evals.summary() if self.evals is not None else {})}
