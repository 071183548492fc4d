"""Scale simulator: the real driver loop and learner fed by W synthetic Ray workers.

A synthetic worker is a slot of a Ray actor with num_cpus=0 that sleeps where a real one
would step its envs (`--period-s` per batch) and returns a batch of the real shape and
dtype, made by the weights it was handed (so policy lag is real). Slots share a few
threaded actor processes (`--slots-per-actor`): 256 separate processes would not fit
this machine's memory, and to the driver a slot is what a worker is (its own in-flight
ref, its own batch in the object store).

    python benchmarks/scale_sim.py --workers 16 64 256 [--period-s 0.1] [--seconds 20]
    python benchmarks/scale_sim.py --workers 64 256 --obs-shape 84 84 4 --no-learner

One JSON line per W: updates/s, samples/s taken in, the driver's cost per batch split
into ray.wait (blocking for the first batch, which includes idle time, and the
non-blocking scan for the others), ray.get, submit, publish and the learner step, object-store bytes/s, the lag
distribution (p50, p95, max) and the drop rate. --obs-shape with uint8 frames (Atari
size) measures transport only (--no-learner): the loop's updates are timed as zero
until the CNN learner exists; the JSON line says so.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import io
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from distributed_ac.config.plan import make_plan  # noqa: E402
from distributed_ac.config.schema import Config  # noqa: E402
from distributed_ac.core.batch import Batch  # noqa: E402
from distributed_ac.config import presets  # noqa: E402
from distributed_ac.config.schema import load_yaml  # noqa: E402
from distributed_ac.envs.space import EnvSpace
from distributed_ac.envs.vector import probe_space  # noqa: E402
from distributed_ac.pool import ray_pool  # noqa: E402
from distributed_ac.run import rundir  # noqa: E402
from distributed_ac.run.metrics import ConsoleProgress, percentile  # noqa: E402


class SyntheticWorker:
    """Stands in for RolloutWorkers: each slot's `collect` sleeps `period_s` plus
    `sample_s` per sample and returns a real-shaped batch of that slot's sub-envs, with
    the time the slot sat idle since its previous batch (as RolloutWorker reports it)."""

    def __init__(self, cfg: Config, envs: dict, period_s: float, sample_s: float, obs_shape,
                 obs_dtype: str):
        self.templates = {slot: _template(cfg.rollout_length, n, obs_shape, obs_dtype)
                          for slot, n in envs.items()}
        self.period_s, self.sample_s = period_s, sample_s
        self.handed_in: dict[int, float] = {}

    def info(self, slot: int) -> dict:
        ray = ray_pool.load(local=False)
        return {"worker_id": slot, "pid": os.getpid(), "rss_mb": 0.0,
                "uses_tensorflow": False, "node_id": ray.get_runtime_context().get_node_id()}

    def collect(self, weights, slot: int) -> Batch:
        start = time.monotonic()
        template = self.templates[slot]
        time.sleep(self.period_s + self.sample_s * template.rewards.size)
        idle = start - self.handed_in[slot] if slot in self.handed_in else 0.0
        self.handed_in[slot] = time.monotonic()
        return dataclasses.replace(template, policy_version=weights.version,
                                   target_version=weights.target_version, idle_s=idle)


def _template(T: int, N: int, obs_shape, obs_dtype: str) -> Batch:
    rng = np.random.default_rng(0)
    f32 = np.float32
    obs = (rng.integers(0, 255, (T, N, *obs_shape), dtype=np.uint8) if obs_dtype == "uint8"
           else rng.standard_normal((T, N, *obs_shape)).astype(f32))
    done = rng.random((T, N)) < 0.01
    mask = np.ones((T, N), f32)
    mask[1:][done[:-1]] = 0.0
    return Batch(obs=obs, actions=rng.integers(0, 2, (T, N)).astype(np.int32),
                 rewards=np.ones((T, N), f32), terminated=done.astype(f32),
                 truncated=np.zeros((T, N), f32), mask=mask,
                 behaviour_logp=np.full((T, N), -0.69, f32),
                 values=np.zeros((T + 1, N), f32), policy_version=0, target_version=0)


class _Remote:
    """`.remote(*args)` that calls an actor method with the slot appended."""

    def __init__(self, method, slot: int):
        self.method, self.slot = method, slot

    def remote(self, *args):
        return self.method.remote(*args, self.slot)


class Slot:
    """One worker slot of a shared actor: what RayPool calls on a worker handle."""

    def __init__(self, actor, slot: int):
        self.collect = _Remote(actor.collect, slot)
        self.info = _Remote(actor.info, slot)


class Timer:
    """Wall seconds and calls per named driver activity."""

    def __init__(self):
        self.s = collections.Counter()
        self.calls = collections.Counter()

    def wrap(self, name, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.s[name] += time.perf_counter() - t0
                self.calls[name] += 1
        return timed


def make_pool(cfg: Config, workers: int, args, timer: Timer):
    ray = ray_pool.load(local=True)
    plan = make_plan(cfg, workers)
    per_actor = args.slots_per_actor
    actor_cls = ray.remote(SyntheticWorker).options(num_cpus=0, max_concurrency=per_actor)
    actors = [actor_cls.remote(cfg, {i: plan.envs[i] for i in range(a, min(a + per_actor, workers))},
                               args.period_s, args.sample_s, args.obs_shape, args.obs_dtype)
              for a in range(0, workers, per_actor)]

    pool_cls = ray_pool.RayPool
    if args.wait == "one-by-one":  # the loop before 72168de, to measure what changed
        pool_cls = type("OneByOnePool", (ray_pool.RayPool,), {"wait": _wait_one_by_one})
    pool = pool_cls(cfg, plan, new_worker=lambda i: Slot(actors[i // per_actor], i),
                    inline_bytes=2**40 if args.inline_weights else ray_pool.INLINE_BYTES)
    pool.publish = timer.wrap("publish", pool.publish)
    pool.submit = timer.wrap("submit", pool.submit)
    return pool, actors


def _wait_one_by_one(self, num, resubmit=None):
    """RayPool.wait as it was: one blocking ray.wait(num_returns=1) and one ray.get per
    batch (failure handling left out: synthetic workers do not fail)."""
    ray, batches = ray_pool.ray, []
    while len(batches) < num:
        (ref,), _ = ray.wait(list(self._in_flight), num_returns=1)
        worker = self._in_flight.pop(ref)
        batches.append(ray.get(ref))
        if resubmit is not None:
            self.submit(worker, resubmit)
    return batches


class NoLearner:
    """Transport only (frames the MLP learner cannot take): versions move, nothing trains."""

    device, skipped_updates = "none", 0

    def __init__(self, learner):
        self.inner, self.policy_version = learner, 0
        self.nets, self.actor_opt, self.critic_opt = learner.nets, learner.actor_opt, learner.critic_opt

    def step(self, batch):
        self.policy_version += 1
        return {"applied": True, **{k: 0.0 for k in ("actor_loss", "critic_loss", "entropy",
                "explained_variance", "grad_norm_actor", "grad_norm_critic",
                "learning_rate_actor", "learning_rate_critic")}}

    def weights(self):
        w = self.inner.weights()
        return dataclasses.replace(w, version=self.policy_version)


def sim_config(workers: int, args) -> tuple[Config, EnvSpace]:
    """The simulated run's Config (CartPole's, or the Atari preset's with --atari) at the
    sizes asked for, and the space its learner trains on."""
    base = load_yaml(presets.DIR / "atari.yaml", Config(env="ALE/Breakout-v5")) if args.atari \
        else Config(env="CartPole-v1")
    cfg = dataclasses.replace(base, num_workers=workers, num_envs=args.num_envs,
                              envs_per_worker=args.envs_per_worker,
                              rollout_length=args.rollout_length, total_env_steps=10**12,
                              checkpoint_every=10**9, log_every_s=1e9,
                              batches_per_update=args.batches_per_update)
    space = (EnvSpace("ALE/Breakout-v5", int(np.prod(args.obs_shape)), True, 4,
                      obs_shape=args.obs_shape, obs_dtype="uint8") if args.atari
             else probe_space(cfg.env, cfg.vectorization))
    return cfg, space


def simulate(workers: int, args) -> dict:
    from distributed_ac.learning.learner import Learner

    ray = ray_pool.load(local=True)
    cfg, space = sim_config(workers, args)
    timer = Timer()
    real_wait, real_get = ray.wait, ray.get
    timed_wait = {True: timer.wrap("ray.wait (blocks)", real_wait),
                  False: timer.wrap("ray.wait (scan)", real_wait)}
    ray.wait = lambda refs, **kw: timed_wait[kw.get("timeout") is None](refs, **kw)
    ray.get = timer.wrap("ray.get", real_get)
    pool, actors = make_pool(cfg, workers, args, timer)
    learner = Learner(cfg, space)
    learner.warm_up()
    if args.no_learner:
        learner = NoLearner(learner)
    learner.step = timer.wrap("learner", learner.step)
    try:
        pool.placement()
        return timed_loop(cfg, pool, space, learner, timer, workers, args)
    finally:
        ray.wait, ray.get = real_wait, real_get
        pool.workers = []  # slots are not actors: kill the shared actors instead
        pool.close()
        for a in actors:
            ray.kill(a)


def timed_loop(cfg: Config, pool, space: EnvSpace, learner, timer: Timer, workers: int,
               args) -> dict:
    """The real driver loop (Trainer.loop) for --seconds on a scratch run directory, timed
    from its start; returns summarize's line."""
    from distributed_ac.training.signals import StopSignals
    from distributed_ac.training.trainer import Trainer

    with tempfile.TemporaryDirectory() as d:
        run = rundir.new_run(os.path.join(d, "run"), cfg)
        progress = ConsoleProgress(cfg.total_env_steps, 1e9, stream=io.StringIO())
        with Trainer(cfg, run, pool, space, False, progress, learner) as trainer:
            stop = StopSignals()
            deadline = time.monotonic() + args.seconds
            original_report = trainer._report

            def report(force=False):  # the loop's stop condition: the clock
                original_report(force)
                if time.monotonic() > deadline:
                    stop.received = True
            trainer._report = report
            timer.s.clear()
            timer.calls.clear()
            t0 = time.monotonic()
            trainer.loop(stop)
            wall = time.monotonic() - t0
            return summarize(trainer, timer, wall, workers, args, cfg)


def summarize(trainer, timer: Timer, wall: float, workers: int, args, cfg: Config) -> dict:
    c = trainer.state.counters
    lags = trainer.lags
    batch_bytes = _batch_bytes(args, trainer.plan)
    per_batch_ms = {k: round(1e3 * v / max(c.batches, 1), 4) for k, v in timer.s.items()}
    driver_ms = sum(v for k, v in per_batch_ms.items() if k not in ("learner", "ray.wait (blocks)"))
    return {"benchmark": "scale_sim", "workers": workers, "period_s": args.period_s,
            "sample_s": args.sample_s,
            "batches_per_update": trainer.per_update, "obs_shape": list(args.obs_shape),
            "obs_dtype": args.obs_dtype,
            "learner": "none" if args.no_learner else ("nature_cnn" if args.atari else "mlp"),
            "seconds": round(wall, 2), "updates_per_s": round(c.updates / wall, 1),
            "batches_per_s": round(c.batches / wall, 1),
            "samples_per_s": round(c.env_steps / wall, 1),
            "object_store_MB_per_s": round(c.batches * batch_bytes / wall / 2**20, 2),
            "batch_bytes": batch_bytes,
            "driver_ms_per_batch": per_batch_ms, "driver_ms_per_batch_excl_learner": round(driver_ms, 4),
            "num_envs": cfg.num_envs, "envs_per_worker": sorted(set(trainer.plan.envs)),
            "learner_batch": trainer.plan.learner_batch,
            "lag_p50": percentile(lags, 50), "lag_p95": percentile(lags, 95),
            "lag_max": max(lags) if lags else None,
            # backpressure: the share of the workers' time spent waiting to be resubmitted, as
            # the batches report it (a wait still under way at the end is not reported yet),
            # and the share they spent collecting (exact: a synthetic collect takes fixed time)
            "worker_wait_pct": round(100.0 * c.worker_wait_s / (wall * workers), 1),
            "worker_busy_pct": round(100.0 * c.batches * _collect_s(args, trainer.plan)
                                     / (wall * workers), 1),
            "dropped_pct": round(100.0 * c.dropped_batches / max(c.batches, 1), 3),
            "max_policy_lag": cfg.max_policy_lag, "wait": args.wait,
            "inline_weights": args.inline_weights}


def _collect_s(args, plan) -> float:
    """Seconds an average synthetic collect takes."""
    return args.period_s + args.sample_s * plan.rollout_length * sum(plan.envs) / plan.workers


def _batch_bytes(args, plan) -> int:
    """Bytes of an average worker batch."""
    T, N = plan.rollout_length, sum(plan.envs) / plan.workers
    item = 1 if args.obs_dtype == "uint8" else 4
    return int(T * N * (int(np.prod(args.obs_shape)) * item + 4 * 6) + (T + 1) * N * 4)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--period-s", type=float, default=0.1,
                   help="seconds a worker takes per batch, besides --sample-s per sample")
    p.add_argument("--sample-s", type=float, default=0.0, help="seconds a worker takes per sample")
    p.add_argument("--seconds", type=float, default=20.0, help="timed loop per W")
    p.add_argument("--num-envs", type=int, default=32, help="the learner batch's sub-envs")
    p.add_argument("--envs-per-worker", type=int, default=0, help="0 = auto (plan.py)")
    p.add_argument("--rollout-length", type=int, default=16)
    p.add_argument("--batches-per-update", type=int, default=0, help="0 = the default (auto)")
    p.add_argument("--slots-per-actor", type=int, default=16)
    p.add_argument("--obs-shape", type=int, nargs="+", default=[4])
    p.add_argument("--no-learner", action="store_true")
    p.add_argument("--atari", action="store_true",
                   help="the Atari preset's learner (the Nature CNN, clip) on uint8 frames")
    p.add_argument("--wait", choices=["batched", "one-by-one"], default="batched",
                   help="RayPool.wait, or the one-ray.wait-per-batch loop it replaced")
    p.add_argument("--inline-weights", action="store_true",
                   help="weights ride inside every collect call instead of one ray.put")
    args = p.parse_args(argv)
    args.obs_shape = tuple(args.obs_shape)
    args.obs_dtype = "float32" if args.obs_shape == (4,) else "uint8"
    if args.obs_dtype == "uint8" and not (args.no_learner or args.atari):
        p.error("image observations need --atari or --no-learner (the MLP takes 4 floats)")
    ray_pool.start_ray(None, False, num_cpus=os.cpu_count())
    try:
        for w in args.workers:
            print(json.dumps(simulate(w, args)), flush=True)
    finally:
        ray_pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
