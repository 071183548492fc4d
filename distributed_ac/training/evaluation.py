"""Evaluation during training: when one is due, the one in flight, its row, the best.

Every `eval_every` updates (or env steps) the driver hands the weights it just published
to the pool's Evaluation (a Ray actor, or a thread in serial mode), which plays
`eval_episodes` episodes with them on an env of its own while training goes on; the
driver only looks, between updates, whether it has finished. At most one evaluation is
in flight: one that falls due meanwhile starts once it has finished, with the newest
weights then (several due meanwhile make one), so evaluations never queue up.

Every evaluation plays the same episodes: seeds 2**31 + seed + i, the ones `dac
evaluate` plays by default and training never uses, with actions sampled (when not
deterministic) from a generator seeded alike. Evaluations thus compare policies on
the same starts, and `dac evaluate --best --episodes K` repeats the best one's score.

The networks of each evaluation are copied (as arrays) when it starts; when its mean
return beats every earlier one's, that copy is written to the run's best/ checkpoint and
best.json records its score. A resume reads best.json, so the best survives it.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np

from distributed_ac.config.schema import Config
from distributed_ac.pool.base import Evaluation
from distributed_ac.run import files
from distributed_ac.run.metrics import ConsoleProgress, MetricsLog, finite_or_none
from distributed_ac.run.rundir import RunDir
from distributed_ac.training.state import Counters

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Requested:
    """An evaluation in flight: what it evaluates, and a copy of those networks."""

    updates: int
    env_steps: int
    wall_s: float
    networks: list[np.ndarray]


class BestCheckpoint:
    """The run's best/ directory: the best evaluation's networks as a checkpoint that
    `dac evaluate --best` and restore_networks(best=True) read, and best.json."""

    def __init__(self, run: RunDir, learner):
        self.run, self.learner = run, learner
        self.record = run.read_best()
        self._source = _network_variables(learner.nets)
        self._spare = None  # (variables, CheckpointManager), built at the first best

    @property
    def score(self) -> float:
        return self.record["mean_return"] if self.record else float("-inf")

    def copy(self) -> list[np.ndarray]:
        """The learner's networks now (taken between updates, never during one)."""
        return [v.numpy() for v in self._source]

    def save(self, networks: list[np.ndarray], record: dict) -> str:
        """Write `networks` as the newest best-<n> (the old one is removed), then best.json."""
        variables, manager = self._spare or self._build()
        for var, value in zip(variables, networks):
            var.assign(value)
        # numbered on from the one named: a resume that rewinds never rewrites the kept one
        import tensorflow as tf

        named = manager.latest_checkpoint
        number = int(named.rsplit("-", 1)[1]) + 1 if named else 1
        with files.named(self.run.best / f"best-{number}", (tf.errors.OpError,)):  # a full disk
            path = manager.save(checkpoint_number=number)
        # relative: a run directory that is moved keeps a record that holds
        self.record = {**record, "checkpoint": os.path.relpath(path, self.run.path)}
        self.run.write_best(self.record)
        return path

    def _build(self):
        """Networks built like the learner's, on the CPU, to hold a copy while it is saved:
        the learner's own go on training meanwhile."""
        import tensorflow as tf

        from distributed_ac.learning.policy_set import network_objects, networks_for

        learner = self.learner
        with tf.device("/CPU:0"):
            nets = networks_for(learner.cfg, learner.space, learner.spec)
        variables = _network_variables(nets)
        assert [v.shape for v in variables] == [v.shape for v in self._source]
        ckpt = tf.train.Checkpoint(**network_objects(nets))
        manager = tf.train.CheckpointManager(ckpt, str(self.run.best), max_to_keep=1,
                                             checkpoint_name="best")
        self._spare = (variables, manager)
        return self._spare


def _network_variables(nets) -> list:
    """Every variable a networks checkpoint holds, once each, in an order that two
    networks built from one spec share (the shared topology's encoder is listed once)."""
    from distributed_ac.learning.policy_set import network_objects

    objects = network_objects(nets)
    seen, out = set(), []
    for name in sorted(objects):
        if name.rsplit("/", 1)[-1] == "model_layout":  # a constant
            continue
        for v in objects[name].variables:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


class Evaluations:
    """The driver's side of evaluation during training (cfg.eval_every > 0)."""

    def __init__(self, cfg: Config, run: RunDir, learner, runner: Evaluation,
                 metrics: MetricsLog, progress: ConsoleProgress, counters: Counters):
        self.cfg, self.runner, self.metrics, self.progress = cfg, runner, metrics, progress
        self.best = BestCheckpoint(run, learner)
        self.flight: Requested | None = None
        self.last: dict | None = None
        self.count = 0
        every = cfg.eval_every
        self.next_due = (self._progress(counters) // every + 1) * every  # a resume continues

    def _progress(self, counts: Counters) -> int:
        return counts.updates if self.cfg.eval_every_unit == "updates" else counts.env_steps

    def after_update(self, counts: Counters, weights) -> None:
        """Record the evaluation in flight if it has finished (never waiting for it); then,
        if one is due and none is in flight, start one of `weights`, those of update
        counts.updates just published."""
        if self.flight is not None:
            outcome = self.runner.result()
            if outcome is not None:
                self._record(outcome, counts)
        if self._progress(counts) >= self.next_due and self.flight is None:
            self.start(counts, weights)

    def start(self, counts: Counters, weights) -> None:
        """Evaluate `weights` (the bundle just published: update counts.updates)."""
        every = self.cfg.eval_every
        self.next_due = (self._progress(counts) // every + 1) * every
        self.flight = Requested(counts.updates, counts.env_steps, counts.wall_s, self.best.copy())
        self.runner.start(weights, self.cfg.eval_episodes, self.cfg.eval_deterministic)

    def finish(self, counts: Counters, weights) -> None:
        """The end of a run that finished: the evaluation in flight, then one of the final
        weights unless they were just evaluated."""
        if self.flight is not None:
            self._record(self.runner.wait(), counts)
        if counts.updates and (self.last is None or self.last["updates"] != counts.updates):
            self.start(counts, weights())
            self._record(self.runner.wait(), counts)

    def _record(self, outcome: dict, counts: Counters) -> None:
        req, self.flight = self.flight, None
        if "error" in outcome:
            log.warning("evaluation of update %d failed: %s", req.updates, outcome["error"])
            return
        returns, lengths = np.asarray(outcome["returns"]), np.asarray(outcome["lengths"])
        stats = {"mean_return": float(returns.mean()), "std_return": float(returns.std()),
                 "mean_length": float(lengths.mean())}
        if self.cfg.self_play:  # games against the fixed player: won, drawn, lost
            stats.update(game_rates(returns))
        self.metrics.write(req.env_steps, req.updates, req.wall_s,
                           {f"eval/{k}": v for k, v in stats.items()},
                           extra={"eval/episodes": len(returns), "eval/done_at_updates": counts.updates})
        self.count += 1
        self.last = {"updates": req.updates, "env_steps": req.env_steps, **stats}
        better = stats["mean_return"] > self.best.score
        if better:
            self.best.save(req.networks, {**self.last, "episodes": len(returns),
                                          "deterministic": self.cfg.eval_deterministic})
        self.progress.note(f"eval at update {req.updates:,d} ({req.env_steps:,d} env steps): "
                           f"mean return {stats['mean_return']:.2f} +- {stats['std_return']:.2f}, "
                           f"length {stats['mean_length']:.1f}"
                           + (f", win rate {stats['win_rate']:.2f} against {self.cfg.eval_opponent}"
                              if "win_rate" in stats else "")
                           + (", the best so far" if better else ""))

    def close(self) -> None:
        """Drop an evaluation under way (a stop, an error) and release the actor."""
        self.flight = None
        self.runner.close()

    def summary(self) -> dict:
        last, best = self.last or {}, self.best.record or {}
        where = best.get("checkpoint")
        return {"evaluations": self.count, "eval_updates": last.get("updates"),
                "eval_mean_return": finite_or_none(last.get("mean_return")),
                "eval_std_return": finite_or_none(last.get("std_return")),
                "eval_mean_length": finite_or_none(last.get("mean_length")),
                **({"eval_win_rate": last.get("win_rate"), "eval_draw_rate": last.get("draw_rate"),
                    "eval_opponent": self.cfg.eval_opponent} if self.cfg.self_play else {}),
                "eval_best_mean_return": finite_or_none(best.get("mean_return")),
                "eval_best_updates": best.get("updates"),
                "best_checkpoint": str(self.best.run.path / where) if where else None}


def game_rates(returns: np.ndarray) -> dict:
    """The share of games won (return > 0), drawn (0) and lost (< 0)."""
    return {"win_rate": float((returns > 0).mean()), "draw_rate": float((returns == 0).mean()),
            "loss_rate": float((returns < 0).mean())}

