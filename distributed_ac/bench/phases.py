"""`dac bench`: where the time goes, one JSON line per measurement.

Phases, each a rate (the median of `repeats` timed windows, every window listed):

  env        the vector env stepping with random actions                    env_steps/s
  worker     env + NumPy policy + batch assembly in RolloutWorker.collect   env_steps/s
  learner    Learner.step (the tf.function) on synthetic batches            samples/s
  broadcast  publish a Weights bundle and have every Ray worker load it     broadcasts/s
  e2e_sync / e2e_async   real training on local Ray (the loop after its first update)

Every phase measures the network the config and the env select (models.spec: auto
is the Nature CNN for image observations): workers act with that torso's NumPy twin and
the learner trains it on [T, N, H, W, C] frames of the env's dtype (uint8 for Atari,
as a real batch carries them). On ALE ids each rate of agent
steps also has `extra.frames_per_s`, x the frame skip of 4 (bench/record.py).

`env` and `worker` with W workers run W fresh processes side by side (what W rollout
workers could reach with no learner and no transport), each with the thread limits a
Ray rollout worker gets before it imports NumPy; the rest use this process as the
learner. Nothing here imports TensorFlow or Ray until a phase needs it. Memory:
`extra.process_rss_mb` is the largest measuring process; a Ray rollout worker's own
resident memory, after a collect, is broadcast's `extra.worker_rss_mb`.

Pipeline efficiency (phase `efficiency`, derived, no run of its own): per (workers,
envs per worker), e2e_async env steps/s over the slower of its two stages, the `worker`
phase at that W and the `learner` phase at the batch size that e2e run trains on and
with the TensorFlow threads `dac train` gives the learner at that W on local Ray
(plan.learner_tf_threads: the cores the workers leave, at least 1). `learner` and the e2e
phases each run in a fresh process, since TensorFlow fixes its threads at its first op.
1.0 means training runs as fast as its slowest stage alone; `extra.limited_by` names
that stage. bench/report.py computes it; commands/bench.py emits it once a cell has all three.
Tables, plots and --compare live in bench/report.py; the JSON line's fields and the
machine's facts in bench/record.py; the synthetic weights and batches in bench/synthetic.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import statistics
import tempfile
import time

import numpy as np

from distributed_ac.bench.record import record
from distributed_ac.bench.synthetic import random_weights, synthetic_batch, with_version
from distributed_ac.config.plan import learner_tf_threads, make_plan
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Weights
from distributed_ac.core.processes import die_with_parent, run_in_child, stop_children
from distributed_ac.envs.space import EnvSpace, space_of
from distributed_ac.envs.vector import space_for, vector_env_for
from distributed_ac.models.spec import ModelSpec


# ---- timing -------------------------------------------------------------------------
def timed_windows(fn, units_per_call: int, repeats: int, min_time: float) -> list[float]:
    """Call fn until each window lasts >= min_time seconds; units per second per window."""
    rates = []
    for _ in range(repeats):
        calls, t0 = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            dt = time.perf_counter() - t0
            if dt >= min_time:
                break
        rates.append(calls * units_per_call / dt)
    return rates


def _env_stepper(cfg: Config, worker_id: int):
    """(one call = one vector step with random actions, env steps per call)."""
    n = worker_envs(cfg)
    envs = vector_env_for(cfg, n)
    space = space_of(envs, cfg.env)
    rng = np.random.default_rng(cfg.seed + worker_id)
    envs.reset(seed=cfg.seed + worker_id)
    if space.multi_discrete:
        lo = np.asarray(space.action_starts)
        hi = lo + np.asarray(space.action_nvec)
        sample = lambda: rng.integers(lo, hi, (n, len(lo)))  # noqa: E731
    elif space.discrete:
        lo, hi = space.action_start, space.action_start + space.num_actions
        sample = lambda: rng.integers(lo, hi, n)  # noqa: E731
    else:
        low, high = np.asarray(space.action_low), np.asarray(space.action_high)
        sample = lambda: rng.uniform(low, high, (n, space.num_actions)).astype(np.float32)  # noqa: E731
    return (lambda: envs.step(sample())), n


def _collector(cfg: Config, worker_id: int, weights: Weights):
    """(one call = one RolloutWorker.collect, env steps per call)."""
    from distributed_ac.acting.worker import RolloutWorker

    worker = RolloutWorker(cfg, worker_id, num_envs=worker_envs(cfg))
    return (lambda: worker.collect(weights)), worker_envs(cfg) * cfg.rollout_length


def _measure_in_process(kind: str, cfg: Config, worker_id: int, repeats: int,
                        min_time: float, barrier=None, weights: Weights | None = None) -> dict:
    from distributed_ac.acting.worker import limit_threads, resident_mb

    limit_threads(cfg.worker_cpus)
    fn, units = _env_stepper(cfg, worker_id) if kind == "env" else _collector(cfg, worker_id, weights)
    fn()  # warm-up: first-call allocations, lazy imports
    if barrier is not None:
        barrier.wait()
    rates = timed_windows(fn, units, repeats, min_time)
    return {"rates": rates, "rss_mb": resident_mb()}


def _child(parent_pid, kind, cfg, worker_id, repeats, min_time, barrier, queue, weights) -> None:
    die_with_parent(parent_pid)
    try:
        queue.put((worker_id, _measure_in_process(kind, cfg, worker_id, repeats, min_time,
                                                  barrier, weights)))
    except BaseException as e:  # report instead of leaving the parent waiting
        barrier.abort()
        queue.put((worker_id, {"error": f"{type(e).__name__}: {e}"}))


@contextlib.contextmanager
def _worker_thread_env(cpus: float):
    """The thread variables a rollout worker sets, in this process's environment while
    children start: a spawned child reads them when it imports NumPy, as a Ray worker
    does (Ray sets OMP_NUM_THREADS before the actor's module loads). Set only later,
    inside the child, OpenBLAS kept one thread per core, and W workers oversubscribed
    the cores (docs/notes/pipeline-efficiency.md, "What the worker phase measured")."""
    from distributed_ac.acting.worker import THREAD_VARS

    saved = {k: os.environ.get(k) for k in THREAD_VARS}
    os.environ.update({k: str(max(1, int(cpus))) for k in THREAD_VARS})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def local_phase(kind: str, cfg: Config, workers: int, repeats: int, min_time: float) -> dict:
    """env or worker phase with `workers` fresh processes side by side (W = 1 too). The
    workers act with one bundle made here (random_weights), so a CNN's never costs a
    measuring process TensorFlow."""
    weights = None
    if kind == "worker":
        weights = random_weights(cfg, space_for(cfg))
    ctx = mp.get_context("spawn")  # fork after TensorFlow/Ray threads exist can deadlock
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(os.getpid(), kind, cfg, i, repeats, min_time,
                                              barrier, queue, weights))
             for i in range(workers)]
    try:
        with _worker_thread_env(cfg.worker_cpus):
            for p in procs:
                p.start()
        results = [queue.get(timeout=600) for _ in procs]
    finally:
        stop_children(procs)
    errors = [r["error"] for _, r in results if "error" in r]
    if errors:
        raise RuntimeError(f"{kind} benchmark process failed: {errors[0]}")
    per_window = [sum(r["rates"][i] for _, r in results) for i in range(repeats)]
    spec = ModelSpec.of(cfg, space_for(cfg)) if weights else None
    model = {"torso": spec.encoder, "core": spec.core} if spec else {}
    return record(kind, cfg, workers, per_window, worker_envs(cfg) * cfg.rollout_length,
                  process_rss_mb=round(max(r["rss_mb"] for _, r in results), 1), **model)


def worker_envs(cfg: Config) -> int:
    """Sub-envs of one benchmarked worker: envs_per_worker (the sweep sets it), else num_envs."""
    return cfg.envs_per_worker or cfg.num_envs


def learner_batch_size(cfg: Config, workers: int) -> int:
    """Samples in one update, as train() gathers them on `workers` workers (plan.py)."""
    return make_plan(cfg, workers).learner_batch


def learner_phase(cfg: Config, space: EnvSpace, batch_size: int, repeats: int,
                  min_time: float, workers: int = 1, threads: int | None = None) -> dict:
    """Learner.step on a synthetic batch of `batch_size` samples (T = rollout_length), with
    `threads` TensorFlow threads if TensorFlow has not run an op yet in this process."""
    from distributed_ac.training.startup import learner_tensorflow

    learner_tensorflow(cfg, space, threads)
    from distributed_ac.learning.learner import Learner
    from distributed_ac.learning.step_args import zero_core_state

    T = cfg.rollout_length
    N = max(1, batch_size // T)
    learner = Learner(cfg, space)
    # a recurrent core unrolls from zero states (each sub-env starting at step 0)
    batch = dataclasses.replace(synthetic_batch(space, T, N, cfg.seed),
                                **zero_core_state(learner.spec, N, T))
    t0 = time.perf_counter()
    learner.step(batch)  # traces the tf.function
    first_s = time.perf_counter() - t0
    learner.step(batch)
    rates = timed_windows(lambda: learner.step(batch), T * N, repeats, min_time)
    t0 = time.perf_counter()
    for _ in range(20):
        learner.weights()
    weights_ms = (time.perf_counter() - t0) / 20 * 1e3
    return record("learner", cfg, workers, rates, T * N, device=learner.device,
                  first_step_s=round(first_s, 3), weights_export_ms=round(weights_ms, 3),
                  tf_threads=learner.threads or None, torso=learner.spec.encoder,
                  core=learner.spec.core)


def pipeline_learner_phase(cfg: Config, space: EnvSpace, workers: int, repeats: int,
                           min_time: float) -> dict:
    """The learner stage as the pipeline at W workers runs it: its batch size, and the
    TensorFlow threads that train() gives it on local Ray (plan.learner_tf_threads), in
    a fresh process, since TensorFlow fixes its threads at its first op."""
    threads = learner_tf_threads(_ray_cfg(cfg, workers), workers, os.cpu_count() or 1, local=True)
    return run_in_child(learner_phase, cfg, space, learner_batch_size(cfg, workers),
                            repeats, min_time, workers, threads)


def _start_local_ray():
    """Local Ray on loopback only, as a local training run starts it."""
    from distributed_ac.pool import ray_pool

    ray_pool.start_ray(None, False)
    return ray_pool


def _ray_cfg(cfg: Config, workers: int) -> Config:
    """Shrink worker_cpus so W workers fit the local CPUs (the sweep may ask for more)."""
    cpus = float(os.cpu_count() or 1)
    return dataclasses.replace(cfg, num_workers=workers,
                               worker_cpus=min(cfg.worker_cpus, cpus / workers))


def broadcast_phase(cfg: Config, workers: int, repeats: int, min_time: float) -> dict:
    """ray.put a new bundle, then every worker loads it; also each worker's resident MB."""
    cfg = _ray_cfg(cfg, workers)
    ray_pool = _start_local_ray()
    pool = ray_pool.RayPool(cfg, make_plan(cfg, workers))
    try:
        space = space_for(cfg)
        bundle = random_weights(cfg, space)  # made once: a CNN's costs a Learner
        version = [1]

        def broadcast():
            version[0] += 1
            pool.broadcast(with_version(bundle, version[0]))

        first = pool.publish(bundle)
        for i in range(workers):  # one collect each first: workers warm, envs stepped
            pool.submit(i, first)
        pool.wait(workers)
        broadcast()
        rates = timed_windows(broadcast, 1, repeats, min_time)
        rss = max(i["rss_mb"] for i in pool.placement())
    finally:
        pool.close()
    return record("broadcast", cfg, workers, rates, 0,
                  ms=round(1e3 / statistics.median(rates), 3), worker_rss_mb=round(rss, 1))


class Recorder:
    """A quiet stand-in for ConsoleProgress that keeps timestamps of what train() reports."""

    def __init__(self):
        self.notes: list[tuple[float, str]] = []
        self.updates: list[tuple[float, int, float]] = []  # (time, env_steps, mean_return)

    def note(self, message: str) -> None:
        self.notes.append((time.monotonic(), message))

    def update(self, env_steps: int, sps: float, mean_return: float, force: bool = False) -> None:
        self.updates.append((time.monotonic(), env_steps, mean_return))

    def close(self) -> None:
        pass

    def steady_rate(self) -> float:
        """Env steps/s from the first update to the last (start-up and tracing excluded)."""
        (t0, s0, _), (t1, s1, _) = self.updates[0], self.updates[-1]
        return (s1 - s0) / max(t1 - t0, 1e-9)


def e2e_phase(cfg: Config, workers: int, mode: str, repeats: int, updates: int) -> dict:
    """Real training on local Ray for `updates` updates, `repeats` separate runs, in a
    fresh process (the learner's TensorFlow threads are set as `dac train` sets them)."""
    return run_in_child(_e2e_runs, cfg, workers, mode, repeats, updates)


def _e2e_runs(cfg: Config, workers: int, mode: str, repeats: int, updates: int) -> dict:
    from distributed_ac.training.startup import shutdown_ray
    from distributed_ac.training.trainer import train

    cfg = dataclasses.replace(_ray_cfg(cfg, workers), mode=mode, serial=False,
                              stop_at_return=None)
    per_update = learner_batch_size(cfg, workers)
    cfg = dataclasses.replace(cfg, total_env_steps=max(updates, 2) * per_update)
    _start_local_ray()
    rates, summaries = [], []
    try:
        for _ in range(repeats):
            rec = Recorder()
            with tempfile.TemporaryDirectory(prefix="dac-bench-") as run_dir:
                summaries.append(train(cfg, progress=rec, run_dir=run_dir))
            rates.append(rec.steady_rate())
    finally:
        shutdown_ray()
    return record(f"e2e_{mode}", cfg, workers, rates, per_update,
                  updates=summaries[-1]["updates"], dropped_batches=summaries[-1]["dropped_batches"],
                  batches_per_update=summaries[-1]["batches_per_update"],
                  max_policy_lag=summaries[-1]["max_policy_lag"],
                  learner_tf_threads=learner_tf_threads(cfg, workers, os.cpu_count() or 1,
                                                        local=True),
                  whole_run_steps_per_s=[s["steps_per_s"] for s in summaries])
