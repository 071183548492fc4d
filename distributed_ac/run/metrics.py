"""What a user watches: episode statistics, console progress, TensorBoard and JSONL rows
(and, with --wandb, the same rows in Weights & Biases: wandb_sink.py).

Progress is a live rich bar on a terminal and plain periodic lines otherwise (CI logs,
pipes), so output stays readable in both.

Every `log_every_s` the driver logs one row of `SCALARS` (names as in cleanRL, so RL
users find them where they expect) to TensorBoard, step = env steps, and the same row
to metrics.jsonl with `env_steps`, `updates` and `wall_s` added. Losses, gradient norms,
learning rates and policy lag are means over the updates since the previous row; the
episodic return and length are means over the episodes that ended since then. A value
with nothing behind it (no episode ended yet) or that is not finite is left out of
TensorBoard and is `null` in the JSONL row.

With evaluation during training, each finished evaluation adds a row of its own
(EVAL_SCALARS, and `eval/episodes`, `eval/done_at_updates` in the JSONL only) whose
env_steps, updates and wall_s are those of the weights it evaluated: it is written when
the evaluation ends, so it can follow rows of later updates.
"""

from __future__ import annotations

import collections
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from distributed_ac.run.files import named
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)


class EpisodeStats:
    """Finished-episode returns and lengths; the mean over the last `window` episodes."""

    def __init__(self, window: int = 100):
        self.returns: collections.deque = collections.deque(maxlen=window)
        self.lengths: collections.deque = collections.deque(maxlen=window)
        self.episodes = 0

    def add(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        self.returns.extend(returns.tolist())
        self.lengths.extend(lengths.tolist())
        self.episodes += len(returns)

    @property
    def full(self) -> bool:
        return len(self.returns) == self.returns.maxlen

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths)) if self.lengths else float("nan")


class ConsoleProgress:
    """Env steps of total, steps/s, ETA and the 100-episode mean return."""

    def __init__(self, total_steps: int, every_s: float, stream=None, start: int = 0):
        self.total, self.every_s = total_steps, every_s
        # soft_wrap: a progress line stays one line in logs, however narrow the "terminal".
        self.console = Console(file=stream or sys.stderr, soft_wrap=True)
        self.live = self.console.is_terminal
        self._last = 0.0
        self._bar = None
        if self.live:
            self._bar = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[sps]:>9,.0f} steps/s"),
                                 TextColumn("return {task.fields[ret]:>8.1f}"),
                                 TimeRemainingColumn(), console=self.console)
            # A resumed run starts the bar where it left off, so the ETA sees only new steps.
            self._task = self._bar.add_task("train", total=total_steps, completed=min(start, total_steps),
                                            sps=0.0, ret=float("nan"))
            self._bar.start()

    def update(self, env_steps: int, sps: float, mean_return: float, force: bool = False) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=min(env_steps, self.total), sps=sps, ret=mean_return)
            return
        now = time.monotonic()
        if force or now - self._last >= self.every_s:
            self._last = now
            self.console.print(f"env_steps {env_steps:>10,d}/{self.total:,d}  "
                               f"steps/s {sps:>9,.0f}  mean_return(100) {mean_return:8.2f}",
                               highlight=False)

    def note(self, message: str) -> None:
        self.console.print(message, highlight=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


# charts/episodic_return is the mean of the episodes that ended since the previous row
# (cleanRL's); charts/mean_return_100 the mean of the last 100 (SB3's ep_rew_mean, and
# what the console and the summary report).
SCALARS = ("charts/episodic_return", "charts/mean_return_100", "charts/episodic_length",
           "charts/SPS",
           "charts/learning_rate_actor", "charts/learning_rate_critic",
           "losses/actor", "losses/critic", "losses/entropy",
           "losses/approx_kl", "losses/clipfrac", "losses/kl_coef",
           "diag/explained_variance", "diag/grad_norm_actor", "diag/grad_norm_critic",
           "diag/behaviour_kl", "diag/policy_lag", "diag/policy_lag_p50", "diag/policy_lag_p95",
           "diag/policy_lag_max", "diag/dropped_batches", "diag/worker_restarts")

# An evaluation's row (training/evaluation.py): greedy (or sampled) whole episodes.
EVAL_SCALARS = ("eval/mean_return", "eval/std_return", "eval/mean_length")

# Scalar name -> key of Learner.step()'s metrics. approx_kl and clipfrac (means over the
# minibatch steps of pi_theta against pi_old) exist only with policy_loss "clip": with
# "pg" they are null; kl_coef, the KL penalty's weight the update applied, is null
# unless --kl-coef is on. behaviour_kl estimates KL(mu || pi) on the batch, mu the policy the
# worker acted with and pi the learner's before the update: 0 in sync mode, and how far
# async mode's correction (V-trace) has to reach otherwise. (The mean ratio pi / mu
# would say nothing: under mu its expectation is 1 whatever pi is.)
LEARNER_KEYS = {"charts/learning_rate_actor": "learning_rate_actor",
                 "charts/learning_rate_critic": "learning_rate_critic",
                 "losses/actor": "actor_loss", "losses/critic": "critic_loss",
                 "losses/entropy": "entropy", "losses/approx_kl": "approx_kl",
                 "losses/clipfrac": "clip_fraction", "losses/kl_coef": "kl_coef",
                 "diag/explained_variance": "explained_variance",
                 "diag/grad_norm_actor": "grad_norm_actor",
                 "diag/grad_norm_critic": "grad_norm_critic",
                 "diag/behaviour_kl": "behaviour_kl"}

POLICY_PREFIX = "policy/"  # LearnerSet.step's metrics of one policy: policy/<name>/<key>
_SCALAR_OF = {key: name for name, key in LEARNER_KEYS.items()}


def _mean(values) -> float | None:
    return float(np.mean(values)) if len(values) else None


class Interval:
    """What happened since the last logged row: update metrics, policy lags, episodes."""

    def __init__(self):
        self.updates: dict[str, list[float]] = collections.defaultdict(list)
        self.lags: list[int] = []
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.policy_rows: dict[str, list[float]] = collections.defaultdict(list)

    def add_update(self, learner_metrics: dict[str, float]) -> None:
        for name, key in LEARNER_KEYS.items():
            if key in learner_metrics:  # see LEARNER_KEYS
                self.updates[name].append(learner_metrics[key])
        for key, value in learner_metrics.items():  # separate policies: each one's as
            if key.startswith(POLICY_PREFIX):       # `<scalar>/<policy>`
                _, policy, inner = key.split("/", 2)
                name = _SCALAR_OF.get(inner)
                if name is not None:
                    self.policy_rows[f"{name}/{policy}"].append(value)

    def add_policy_episodes(self, returns: dict[str, np.ndarray]) -> None:
        """Separate policies: the returns of the episodes each one's agents ended."""
        for policy, r in returns.items():
            self.policy_rows[f"charts/episodic_return/{policy}"].extend(r.tolist())

    def add_lags(self, lags: list[int]) -> None:
        """Policy lag of every batch received, used or dropped."""
        self.lags.extend(lags)

    def add_episodes(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        self.returns.extend(returns.tolist())
        self.lengths.extend(lengths.tolist())

    @property
    def empty(self) -> bool:
        return not self.updates and not self.returns and not self.lags

    def _lag(self, q: float) -> float | None:
        return float(np.percentile(self.lags, q)) if self.lags else None

    def scalars(self, sps: float, dropped_batches: int, worker_restarts: int,
                mean_return_100: float | None = None) -> dict:
        row = {"charts/episodic_return": _mean(self.returns),
               "charts/mean_return_100": mean_return_100,
               "charts/episodic_length": _mean(self.lengths),
               "charts/SPS": sps,
               **{name: _mean(self.updates[name]) for name in LEARNER_KEYS},
               "diag/policy_lag": _mean(self.lags),
               "diag/policy_lag_p50": self._lag(50), "diag/policy_lag_p95": self._lag(95),
               "diag/policy_lag_max": self._lag(100),
               "diag/dropped_batches": dropped_batches,
               "diag/worker_restarts": worker_restarts}
        return {**{name: row[name] for name in SCALARS},
                **{name: _mean(values) for name, values in sorted(self.policy_rows.items())}}


def finite_or_none(v):
    """A number as JSON can hold it: NaN and infinities become None (null)."""
    if v is None or isinstance(v, int):
        return v
    return v if math.isfinite(v) else None


class MetricsLog:
    """TensorBoard scalars (tf.summary, step = env steps) plus metrics.jsonl, row by row."""

    def __init__(self, tensorboard_dir: Path, jsonl_path: Path, resume_at: int | None = None,
                 sinks: tuple = ()):
        """`sinks`: more places each row goes to (wandb_sink.WandbSink), each given the
        row as TensorBoard gets it through `sink.write(env_steps, scalars)`."""
        import tensorflow as tf  # the learner has loaded it already; dac plot never gets here
        from tensorflow.core.framework.summary_pb2 import SummaryMetadata

        self._tf = tf
        self._sinks = sinks
        self._paths = tensorboard_dir, jsonl_path
        # What tensorboard.summary.scalar writes, without needing the tensorboard package
        # to write it (only to view it): a float32 tensor tagged for the scalars plugin.
        self._scalar_meta = SummaryMetadata()
        self._scalar_meta.plugin_data.plugin_name = "scalars"
        if resume_at is not None:
            with named(jsonl_path):
                keep_rows_up_to(jsonl_path, resume_at)
            with named(tensorboard_dir, (tf.errors.OpError,)):
                keep_events_up_to(tf, tensorboard_dir, resume_at)
        with named(tensorboard_dir, (tf.errors.OpError,)):
            self._writer = tf.summary.create_file_writer(str(tensorboard_dir))
        self._jsonl = open(jsonl_path, "a", encoding="utf-8")

    def write(self, env_steps: int, updates: int, wall_s: float, scalars: dict,
              extra: dict | None = None) -> dict:
        """One row: `scalars` to TensorBoard and metrics.jsonl, `extra` to metrics.jsonl only."""
        row = {"env_steps": env_steps, "updates": updates, "wall_s": round(wall_s, 3),
               **{k: finite_or_none(v) for k, v in scalars.items()}, **(extra or {})}
        logged = {name: row[name] for name in scalars if row[name] is not None}
        tensorboard, jsonl = self._paths
        with named(tensorboard, (self._tf.errors.OpError,)):
            with self._writer.as_default(step=env_steps):
                for name, value in logged.items():
                    self._tf.summary.write(name, self._tf.constant(value, self._tf.float32),
                                           metadata=self._scalar_meta)
            self._writer.flush()
        with named(jsonl):
            self._jsonl.write(json.dumps(row) + "\n")
            self._jsonl.flush()
        for sink in self._sinks:
            sink.write(env_steps, logged)
        return row

    def close(self) -> None:
        tensorboard, jsonl = self._paths
        try:
            with named(tensorboard, (self._tf.errors.OpError,)):
                self._writer.close()
        finally:
            with named(jsonl):
                self._jsonl.close()  # (a row a full disk refused is tried once more here)


def read_rows(path: str | Path) -> list[dict]:
    """The JSON objects of a JSON-lines file (metrics.jsonl, a benchmark's records); a
    line that is not one, such as a torn last line from a crash, is skipped."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def keep_rows_up_to(path: Path, env_steps: int) -> None:
    """On resume, drop rows logged after the checkpoint: that stretch is trained again."""
    if not path.exists():
        return
    rows = [r for r in read_rows(path) if r["env_steps"] <= env_steps]
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)


def keep_events_up_to(tf, tensorboard_dir: Path, env_steps: int) -> None:
    """On resume, drop the TensorBoard scalars logged after the checkpoint, as
    keep_rows_up_to does for metrics.jsonl: a run killed after its last checkpoint would
    otherwise show that stretch twice. Each events file is rewritten without them (its
    other records, such as the file's version header, stay), and a torn last record
    from the kill is dropped."""
    from tensorflow.core.util.event_pb2 import Event

    for path in sorted(Path(tensorboard_dir).glob("events.out.tfevents.*")):
        kept, dropped = [], False
        try:
            for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
                event = Event.FromString(record)
                if event.HasField("summary") and event.step > env_steps:
                    dropped = True
                else:
                    kept.append(record)
        except tf.errors.DataLossError:  # a record the kill cut short
            dropped = True
        if dropped:
            tmp = path.with_name(path.name + ".tmp")
            with tf.io.TFRecordWriter(str(tmp)) as writer:
                for record in kept:
                    writer.write(record)
            os.replace(tmp, path)


def percentile(counts: collections.Counter, q: float) -> int | None:
    """The q-th percentile (nearest rank) of the values counted in `counts`; None if none."""
    total = sum(counts.values())
    if not total:
        return None
    rank, seen = max(1, -(-q * total // 100)), 0
    for lag in sorted(counts):
        seen += counts[lag]
        if seen >= rank:
            return lag
    return max(counts)
