"""The driver loop, top to bottom. Serial and Ray modes run the same loop over a pool.

    publish weights -> workers collect -> wait (all: sync / first: async) -> drop stale
    batches -> learner.step -> publish new weights -> resubmit

In async mode a worker is handed the newest published weights the moment its batch
arrives, before the learner trains on that batch, so sampling and learning overlap;
the resulting policy lag is measured per batch and corrected in the learner.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from distributed_ac.batch import Batch, Weights
from distributed_ac.config import Config
from distributed_ac.envs import probe_space
from distributed_ac.metrics import ConsoleProgress, EpisodeStats
from distributed_ac.rollout import RolloutWorker

log = logging.getLogger(__name__)


class SerialPool:
    """The RayPool interface over in-process RolloutWorkers (no Ray, deterministic)."""

    def __init__(self, cfg: Config, num_workers: int):
        self.workers = [RolloutWorker(cfg, i, limit_cpus=False) for i in range(num_workers)]
        self._queue: list[tuple[int, Weights]] = []

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

    def close(self) -> None:
        for w in self.workers:
            w.close()


@dataclasses.dataclass
class Counters:
    env_steps: int = 0
    updates: int = 0
    dropped_batches: int = 0
    max_lag: int = 0


def make_pool(cfg: Config, address: str | None, dashboard: bool):
    if cfg.serial:
        return SerialPool(cfg, cfg.num_workers or 1)
    from distributed_ac import distributed  # Ray is imported only when it is used

    distributed.start_ray(address, dashboard)
    n = cfg.num_workers or distributed.default_num_workers(cfg, local=not address)
    return distributed.RayPool(cfg, n)


def train(cfg: Config, address: str | None = None, dashboard: bool = False,
          progress: ConsoleProgress | None = None) -> dict:
    """Train until the env-step budget (or `stop_at_return`) is reached; return a summary."""
    start = time.monotonic()
    space = probe_space(cfg.env, cfg.vectorization)
    pool = make_pool(cfg, address, dashboard)  # workers boot while TensorFlow loads below
    from distributed_ac.learner import Learner

    learner = Learner(cfg, space)
    progress = progress or ConsoleProgress(cfg.total_env_steps, cfg.log_every_s)
    progress.note(f"learner on {learner.device} at {pool.learner_node()}; {len(pool)} rollout "
                  f"worker(s), {cfg.envs_per_worker} envs each, mode {cfg.mode}")
    try:
        for info in pool.placement():
            progress.note(f"worker {info['worker_id']}: pid {info['pid']} on node {info['node_ip']} "
                          f"({info['node']}), "
                          f"{info['rss_mb']:.0f} MB resident")
        counters, stats = _loop(cfg, pool, learner, progress, start)
    finally:
        pool.close()
        progress.close()
    wall = time.monotonic() - start
    return {"env": cfg.env, "mode": cfg.mode, "topology": cfg.topology,
            "env_steps": counters.env_steps, "updates": counters.updates,
            "episodes": stats.episodes, "mean_return_100": stats.mean_return,
            "solved": _solved(cfg, stats), "dropped_batches": counters.dropped_batches,
            "max_policy_lag": counters.max_lag, "wall_s": round(wall, 3),
            "steps_per_s": round(counters.env_steps / wall, 1)}


def _solved(cfg: Config, stats: EpisodeStats) -> bool:
    return cfg.stop_at_return is not None and stats.full and stats.mean_return >= cfg.stop_at_return


def _loop(cfg: Config, pool, learner, progress: ConsoleProgress, start: float):
    counters, stats = Counters(), EpisodeStats(100)
    per_update = len(pool) if cfg.mode == "sync" else 1
    ref = pool.publish(learner.weights())
    for i in range(len(pool)):
        pool.submit(i, ref)
    train_start = time.monotonic()
    while counters.env_steps < cfg.total_env_steps and not _solved(cfg, stats):
        batches = pool.wait(per_update)
        if cfg.mode == "async":  # keep the worker busy while the learner trains
            for b in batches:
                pool.submit(b.worker_id, ref)
        fresh = _drop_stale(cfg, batches, learner.policy_version, counters)
        if fresh:
            batch = Batch.concat(fresh)
            learner.step(batch)
            counters.updates += 1
            counters.env_steps += batch.env_steps
            stats.add(batch.episode_returns, batch.episode_lengths)
            ref = pool.publish(learner.weights())
        if cfg.mode == "sync":
            for i in range(len(pool)):
                pool.submit(i, ref)
        sps = counters.env_steps / max(time.monotonic() - train_start, 1e-9)
        progress.update(counters.env_steps, sps, stats.mean_return)
    progress.update(counters.env_steps, counters.env_steps / (time.monotonic() - train_start),
                    stats.mean_return, force=True)
    return counters, stats


def _drop_stale(cfg: Config, batches: list[Batch], version: int, counters: Counters) -> list[Batch]:
    """Keep batches within max_policy_lag of the learner's version; count the rest."""
    fresh = []
    for b in batches:
        lag = version - b.policy_version
        counters.max_lag = max(counters.max_lag, lag)
        if lag > cfg.max_policy_lag:
            counters.dropped_batches += 1
        else:
            fresh.append(b)
    return fresh
