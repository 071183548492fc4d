"""The summary `dac train` prints as its last line (and train() returns): one JSON object
put together from the parts of a finished session, each part a small dict of its own."""

from __future__ import annotations

import collections
import dataclasses

from distributed_ac.config.plan import RunPlan
from distributed_ac.config.schema import Config
from distributed_ac.models.spec import ModelSpec
from distributed_ac.run.metrics import EpisodeStats, finite_or_none, percentile
from distributed_ac.training.state import Counters


def model(cfg: Config, spec: ModelSpec) -> dict:
    """The env, the mode and the model's parts."""
    return {"env": cfg.env, "mode": cfg.mode,
            "topology": "shared" if spec.shared else "separate",
            "torso": spec.encoder, "core": spec.core}


def plan(run_plan: RunPlan, bootstrap_values: str) -> dict:
    """Workers, batches an update and where the bootstrap values came from."""
    return {"workers": run_plan.workers, "batches_per_update": run_plan.batches_per_update,
            "bootstrap_values": bootstrap_values}


def learning(counts: Counters, stats: EpisodeStats, solved: bool | None) -> dict:
    """Steps, updates, episodes and the 100-episode mean (null until an episode ends:
    NaN is not JSON); `solved` is None without a stop_at_return."""
    return {"env_steps": counts.env_steps, "updates": counts.updates, "episodes": stats.episodes,
            "mean_return_100": finite_or_none(stats.mean_return), "solved": solved}


def batches(counts: Counters, lags: collections.Counter, workers: int,
            skipped_updates: int) -> dict:
    """What came of the workers' batches: dropped, their policy lag, restarts, and the
    share of the workers' time spent waiting for the driver and learner."""
    return {"batches": counts.batches, "dropped_batches": counts.dropped_batches,
            "dropped_pct": round(100.0 * counts.dropped_batches / max(counts.batches, 1), 2),
            "max_policy_lag": counts.max_lag, "policy_lag_p50": percentile(lags, 50),
            "policy_lag_p95": percentile(lags, 95), "worker_restarts": counts.worker_restarts,
            "nonfinite_batches": counts.nonfinite_batches,
            "worker_wait_s": round(counts.worker_wait_s, 1),
            "worker_wait_pct": round(100.0 * counts.worker_wait_s
                                     / max(counts.wall_s * workers, 1e-9), 1),
            "skipped_updates": skipped_updates}


def session(wall: float, new_steps: int, run_dir: str, checkpoint: str | None,
            stopped_by: str | None) -> dict:
    """This session's wall time and speed (a resumed run counts only its own steps),
    where it wrote, and the signal that stopped it, if one did."""
    return {"wall_s": round(wall, 3), "steps_per_s": round(new_steps / wall, 1),
            "run_dir": run_dir, "checkpoint": checkpoint, "stopped_by": stopped_by}


def _plain(d: dict) -> dict:
    """A dataclass's dict with tuples as lists (YAML-safe)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def resolved(learner) -> dict:
    """What the learner resolved, for plan.yaml beside the run plan."""
    return {"model": _plain(dataclasses.asdict(learner.spec)),
            "learner_device": learner.device,
            "learner_threads": learner.threads or "TensorFlow's default",
            "learner_inter_op_threads": learner.inter_op_threads or "TensorFlow's default",
            "bootstrap_values": learner.objective.bootstrap_values_from}


def start_lines(cfg: Config, learner, run_plan: RunPlan, spans: dict, node: str) -> list[str]:
    """The lines a session starts with: the schedules, then the learner and the plan."""
    threads = f" ({learner.threads} TF thread(s))" if learner.threads else ""
    if learner.threads and learner.inter_op_threads > learner.threads:
        threads = (f" ({learner.threads} TF thread(s) an op, "
                   f"{learner.inter_op_threads} side by side)")
    return [f"learning rates x{cfg.actor_lr_decay_rate:g} (actor) and "
            f"x{cfg.critic_lr_decay_rate:g} (critic) every {spans['actor']:,d} "
            f"and {spans['critic']:,d} optimizer steps",
            f"learner on {learner.device}{threads} at {node}; {run_plan.describe(cfg.mode)}"]
