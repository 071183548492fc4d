"""One trial of `dac tune`: a real training run (training.trainer.train) inside the
trial's Ray actor, reporting to Tune every `report_every` updates with a checkpoint.

Where its rollout workers run (TuneSpec.trial_workers):
- serial (the default): in the trial's own process, stepped in turn by the serial pool.
  The trial holds one CPU (its placement group is one bundle), so trials never
  oversubscribe the cluster and nothing inside a trial competes with Tune for Ray's
  scheduling; the price is that a trial's workers share that one core.
- ray: each worker is a Ray actor in a bundle of the trial's placement group (the pool
  places them there), for trials with envs too slow for one core.

Checkpoints use this project's format: the run's own checkpoint (tf.train.Checkpoint
tensors and the run's config.yaml; no pickle) is what a Tune checkpoint directory holds.
A trial given a checkpoint (Tune's restore after a failure or `--resume`, or PBT's
exploit, which hands a trial another trial's checkpoint and a perturbed config) resumes
the run from it: networks, optimizer state, normalisers and counters come from the
checkpoint, the learning rates and entropy coefficient from the trial's config. The
serial workers' recorded actions are left out of a Tune checkpoint (replaying them
would cost every exploit the steps of the whole run so far): envs restart from seeds
drawn from the checkpointed stream, as a Ray pool's do on resume.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
import time
from pathlib import Path

from distributed_ac.config.schema import Config
from distributed_ac.tuning.experiment_spec import TuneSpec

RUN = "run"  # the trial's run directory, inside its Tune trial directory
RATE_FIELDS = ("actor_lr", "critic_lr", "entropy_coef")
STAGED_KEPT = 3

# The learner of the last run in this process, kept so that a trial restored from a
# checkpoint (PBT's exploit, on a reused actor) takes new rates on the learner it has,
# with no rebuild and no retracing: (config without its rates, Learner).
_kept_learner: tuple[Config, object] | None = None


class TuneSession:
    """What a trial needs of Tune (a test hands in a stand-in)."""

    def __init__(self):
        from ray import tune

        self._tune = tune

    def checkpoint_dir(self):
        """A context manager giving the directory of the checkpoint to start from, or None."""
        ckpt = self._tune.get_checkpoint()
        return ckpt.as_directory() if ckpt is not None else None

    def trial_dir(self) -> Path:
        return Path(self._tune.get_context().get_trial_dir())

    def trial_index(self) -> int:
        """The trial's number in its experiment (Tune's trial ids end in it: "_00003")."""
        tail = self._tune.get_context().get_trial_id()[-5:]
        return int(tail) if tail.isdigit() else 0

    def report(self, metrics: dict, checkpoint_dir: Path) -> None:
        self._tune.report(metrics, checkpoint=self._tune.Checkpoint.from_directory(
            str(checkpoint_dir)))


def trial_config(spec: TuneSpec, sampled: dict) -> Config:
    """The Config a trial trains with: the search's values over the base, with the
    trial's worker placement and one TensorFlow thread for its one learner CPU."""
    cfg = spec.trial_config(sampled)
    return dataclasses.replace(cfg, serial=spec.trial_workers == "serial",
                               num_workers=spec.workers(cfg),
                               learner_threads=cfg.learner_threads or 1)


def run_trial(sampled: dict, spec: TuneSpec, session: TuneSession | None = None) -> None:
    """Tune's function trainable: train one config, report every spec.report_every updates
    (returns nothing: Tune would take a returned dict for one more result)."""
    from distributed_ac.run.metrics import ConsoleProgress
    from distributed_ac.training.trainer import train

    session = session or TuneSession()
    from distributed_ac.envs.vector import resolved

    cfg, _ = resolved(trial_config(spec, sampled))  # as train() settles it, said there
    if "seed" not in sampled:  # trials that start alike are still different runs
        cfg = dataclasses.replace(cfg, seed=cfg.seed + session.trial_index())
    run_dir = session.trial_dir() / RUN
    resume = _unpack_start(session, run_dir)
    reporter = Reporter(session, spec.report_every, run_dir, spec.metric)
    learner = _reusable_learner(cfg) if resume else None
    if learner is None:
        from distributed_ac.envs.vector import space_for
        from distributed_ac.training.startup import build_learner

        learner = build_learner(cfg, space_for(cfg), cfg.learner_threads)
    keep_learner(cfg, learner)
    with open(session.trial_dir() / "train.log", "a") as log:
        progress = ConsoleProgress(cfg.total_env_steps, cfg.log_every_s, stream=log)
        summary = train(cfg, run_dir=run_dir, resume=resume, overwrite=not resume,
                        progress=progress, on_update=reporter, learner=learner)
    reporter.final(summary)


def _unpack_start(session: TuneSession, run_dir: Path) -> bool:
    """Put the checkpoint Tune hands this trial (if any) in its run directory as the run's
    only checkpoint; return whether there was one."""
    where = session.checkpoint_dir()
    if where is None:
        return False
    with where as src:
        src = Path(src)
        if run_dir.exists():
            shutil.rmtree(run_dir)
        (run_dir / "checkpoints").mkdir(parents=True)
        shutil.copy2(src / "config.yaml", run_dir / "config.yaml")
        for f in (src / "checkpoints").iterdir():
            shutil.copy2(f, run_dir / "checkpoints" / f.name)
    return True


def _rate_free(cfg: Config) -> Config:
    return dataclasses.replace(cfg, **{f: getattr(Config, f) for f in RATE_FIELDS})


def _reusable_learner(cfg: Config):
    """The learner this process kept, if it fits `cfg` but for the rates (the checkpoint
    about to be restored then sets every variable it has), with the new rates applied."""
    if _kept_learner is None or _kept_learner[0] != _rate_free(cfg):
        return None
    learner = _kept_learner[1]
    learner.cfg = cfg
    learner.set_rates(cfg.actor_lr, cfg.critic_lr, cfg.entropy_coef)
    return learner


def keep_learner(cfg: Config, learner) -> None:
    global _kept_learner
    _kept_learner = (_rate_free(cfg), learner)


class Reporter:
    """train()'s on_update hook: every `every` updates, a checkpoint and a report."""

    def __init__(self, session: TuneSession, every: int, run_dir: Path, metric: str):
        self.session, self.every, self.run_dir, self.metric = session, every, run_dir, metric
        self.last_row: dict | None = None
        self.reported_at: int | None = None  # updates of the last report
        self.pending = False  # a due report waits for the metric's first value
        self.staged: list[Path] = []  # checkpoint directories handed to Tune, oldest first

    def __call__(self, row: dict, save) -> None:
        self.last_row = row
        self.pending = self.pending or row["updates"] % self.every == 0
        if self.pending and _finite(row.get(self.metric)):
            self._report(row, save())

    def final(self, summary: dict) -> None:
        """The run's last state, if not reported yet (its final checkpoint is written)."""
        row = self.last_row
        if row is not None and row["updates"] != self.reported_at and summary["checkpoint"]:
            self._report(row, summary["checkpoint"])

    def _report(self, row: dict, checkpoint: str) -> None:
        self.pending = False
        self.reported_at = row["updates"]
        metrics = {k: (v if _finite(v) else None) for k, v in row.items()}
        staged = Path(tempfile.mkdtemp(prefix=f"report-{row['updates']:09d}-",
                                       dir=self.run_dir.parent))
        pack_checkpoint(self.run_dir, checkpoint, staged)
        # Tune may still be copying a staged checkpoint when report() returns (or the
        # trial is stopped inside it): only those two reports older are removed
        self.staged.append(staged)
        while len(self.staged) > STAGED_KEPT:
            shutil.rmtree(self.staged.pop(0), ignore_errors=True)
        self.session.report(metrics, staged)


def pack_checkpoint(run_dir: Path, checkpoint: str, out: Path) -> None:
    """A run's config and one of its checkpoints (TensorFlow's files, and a state file
    naming it), as a directory a resume reads; the serial workers' actions stay out."""
    name = Path(checkpoint).name  # ckpt-<updates>
    (out / "checkpoints").mkdir(parents=True)
    shutil.copy2(run_dir / "config.yaml", out / "config.yaml")
    for f in (run_dir / "checkpoints").glob(name + ".*"):
        if not f.name.endswith(".workers.npz"):
            shutil.copy2(f, out / "checkpoints" / f.name)
    # TF's state file; a CheckpointManager lists only checkpoints stamped after the
    # last preserved time, so both stamps are written
    now = time.time()
    (out / "checkpoints" / "checkpoint").write_text(
        f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n'
        f"all_model_checkpoint_timestamps: {now:.3f}\nlast_preserved_timestamp: {now - 1:.3f}\n")


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)
