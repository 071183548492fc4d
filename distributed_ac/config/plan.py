"""The run plan: what a Config means on W workers, resolved once per run.

What an agent learns is set by the learner batch (about num_envs x rollout_length
samples an update) and the minibatch size; the worker count only sets how fast those
samples arrive. So the num_envs sub-envs are split over the workers, and an update
gathers one batch from each: the same learner batch, made by the same policy version
(lag 1, as with one worker), at any W up to num_envs. Past that every worker steps one
sub-env and an update gathers num_envs of their batches: IMPALA's regime, where the
lag is about W / num_envs and V-trace corrects it.

The plan is resolved once, written to the run directory (plan.yaml) and passed down.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import yaml

from distributed_ac.config.schema import Config, minibatch_samples


@dataclasses.dataclass(frozen=True)
class RunPlan:
    workers: int
    envs: tuple[int, ...]
    """Sub-envs of each worker."""
    rollout_length: int
    batches_per_update: int
    """Worker batches joined into one learner batch (all of them in sync mode)."""
    minibatches: int
    """Optimizer steps per pass over a learner batch (1 for the pg loss)."""
    epochs: int
    """Passes over each learner batch (1 for the pg loss)."""
    updates: int
    """Updates the env-step budget makes: what an auto learning-rate schedule spans."""
    rows_per_env: int = 1
    """Rows each sub-env adds to a batch: a PettingZoo env's agents, else 1."""

    @property
    def learner_batch(self) -> int:
        """Samples in a learner batch (with equal worker batches; nominal otherwise)."""
        per_worker = sorted(self.envs, reverse=True)[:self.batches_per_update]
        return sum(per_worker) * self.rows_per_env * self.rollout_length

    def first_env(self, worker: int) -> int:
        """The index among the run's sub-envs of `worker`'s first (what seeds them)."""
        return sum(self.envs[:worker])

    @property
    def optimizer_steps_per_update(self) -> int:
        return self.epochs * self.minibatches

    @property
    def expected_lag(self) -> float:
        """Policy versions a batch is old when trained on: 1 while every worker's batch
        joins each update, about W / B when only B of W do (0 in sync mode)."""
        return max(1.0, self.workers / self.batches_per_update)

    def describe(self, mode: str) -> str:
        """The plan in one line: workers, sub-envs, learner batch and expected lag."""
        low, high = min(self.envs), max(self.envs)
        each = f"{low}" if low == high else f"{low}-{high}"
        agents = f" (x {self.rows_per_env} agents)" if self.rows_per_env > 1 else ""
        gathered = ("" if mode == "sync" else
                    f", {self.batches_per_update} worker batch(es) an update (policy lag ~"
                    f"{self.expected_lag:g})")
        return (f"{self.workers} rollout worker(s), {each} envs{agents} each, "
                f"mode {mode}{gathered}; "
                f"learner batch {self.learner_batch:,d} samples, "
                f"{self.optimizer_steps_per_update} optimizer step(s) an update, "
                f"{self.updates:,d} updates planned")

    def summary(self) -> dict:
        out = dataclasses.asdict(self)
        out["envs"] = list(self.envs)
        out.update(learner_batch=self.learner_batch,
                   optimizer_steps_per_update=self.optimizer_steps_per_update,
                   expected_lag=round(self.expected_lag, 2))
        return out

    def write(self, path: str | Path, **resolved) -> None:
        """plan.yaml: the plan, and what else the run resolved once (`resolved`: the
        model's parts, the learner's device and threads)."""
        Path(path).write_text(yaml.safe_dump({**self.summary(), **resolved}, sort_keys=False))


def split_envs(num_envs: int, workers: int) -> tuple[int, ...]:
    """num_envs sub-envs over `workers` as evenly as they go, at least one each."""
    base, extra = divmod(num_envs, workers)
    return tuple(max(1, base + (i < extra)) for i in range(workers))


def make_plan(cfg: Config, workers: int, rows_per_env: int = 1) -> RunPlan:
    """The plan of `cfg` on `workers` rollout workers, each sub-env adding
    `rows_per_env` rows to a batch (a PettingZoo env's agents)."""
    envs = ((cfg.envs_per_worker,) * workers if cfg.envs_per_worker
            else split_envs(cfg.num_envs, workers))
    per_update = _joined_batches(cfg, envs)
    samples = sum(sorted(envs, reverse=True)[:per_update]) * rows_per_env * cfg.rollout_length
    clip = cfg.policy_loss == "clip"
    minibatches = minibatch_count(samples, minibatch_samples(cfg)) if clip else 1
    return RunPlan(workers=workers, envs=envs, rollout_length=cfg.rollout_length,
                   batches_per_update=per_update, minibatches=minibatches,
                   epochs=cfg.update_epochs if clip else 1,
                   updates=max(1, -(-cfg.total_env_steps // samples)),
                   rows_per_env=rows_per_env)


def _joined_batches(cfg: Config, envs: tuple[int, ...]) -> int:
    workers = len(envs)
    if cfg.mode == "sync":
        return workers
    if cfg.batches_per_update:
        return min(cfg.batches_per_update, workers)
    # enough equal worker batches to hold num_envs sub-envs' rollouts
    return min(workers, max(1, round(cfg.num_envs / envs[-1])))


def minibatch_count(samples: int, minibatch_size: int) -> int:
    """Minibatches a learner batch of `samples` is split into (clipped.py does the same in
    its graph, from the batch it was given)."""
    return max(1, round(samples / minibatch_size))


def auto_workers(cfg: Config, cpus: float, local: bool) -> int:
    """Workers when num_workers is 0: as many as `cpus` hold (locally one CPU stays with the
    learner), and with envs_per_worker auto at most num_envs (a worker more would only
    add lag to the same learner batch)."""
    fit = max(1, int((cpus - (1.0 if local else 0.0)) // cfg.worker_cpus))
    return fit if cfg.envs_per_worker else min(fit, cfg.num_envs)


def learner_tf_threads(cfg: Config, workers: int, cpus: int, local: bool) -> int | None:
    """TensorFlow threads for the learner, or None for TensorFlow's default (every core).

    On a local Ray the workers hold ceil(W * worker_cpus) of the machine's cores and the
    learner gets the rest (at least one): TensorFlow's default threads would contend with
    the workers. Serial runs and clusters keep TensorFlow's default."""
    if cfg.learner_threads:
        return cfg.learner_threads
    if cfg.serial or not local:  # serial: one thing runs at a time; cluster: unknown layout
        return None
    return max(1, cpus - math.ceil(workers * cfg.worker_cpus))


def learner_inter_op_threads(cfg: Config, threads: int | None, recurrent_pair: bool) -> int | None:
    """TensorFlow's inter-op threads for a learner of `threads` intra-op threads: the same,
    except that a clipped-surrogate update of two recurrent networks (`recurrent_pair`: a
    core each, the separate topology) gets at least two. Its every minibatch step unrolls
    the actor's and the critic's cores, two independent chains of small dependent ops
    that a second thread runs side by side; such a learner is the slowest stage by far,
    so its workers wait and leave a core idle for it. Each op still runs on `threads`
    (intra-op), so its results are the same. learner_threads, when set, is kept."""
    if threads is None or cfg.learner_threads or cfg.policy_loss != "clip" or not recurrent_pair:
        return threads
    return max(threads, 2)
