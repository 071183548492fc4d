"""Weights & Biases beside TensorBoard (--wandb): the config, the rows, the summary.

MetricsLog hands this sink each row exactly as TensorBoard gets it (its scalars that
are not null), with the row's env steps; an evaluation's row included. The driver alone
makes one (trainer.py), and `wandb` is imported here only, when the sink is made or
checked for: a run without --wandb never loads it.

Rows are logged with `env_steps` as W&B's step metric (define_metric), not as
wandb.log's `step`: W&B drops a row whose step is below one it already has, and an
evaluation's row carries the env steps of the weights it evaluated, which can be behind
the training rows written while it played.

The W&B run's id is kept in the run directory (RunDir.wandb_id), so a resume logs to the same
W&B run (resume="allow"). The rows after the checkpoint a resume starts from, which
metrics.jsonl and TensorBoard drop, stay in W&B, which cannot take logged rows back:
that stretch shows twice there.
"""

from __future__ import annotations

import os

from distributed_ac.config.schema import Config, to_dict
from distributed_ac.core.errors import MissingDependency, UsageError
from distributed_ac.run.files import named
from distributed_ac.run.rundir import RunDir

DEFAULT_PROJECT = "distributed_ac"


def require_wandb():
    """The wandb module, or one line saying how to install it."""
    try:
        import wandb
    except ImportError:
        raise MissingDependency("--wandb needs the wandb package: "
                                "pip install 'distributed_ac[wandb]'") from None
    return wandb


class WandbSink:
    """One W&B run for a session of a dac run: started here, before the run directory
    `run` is written (keep_id then), finished by finish()."""

    def __init__(self, cfg: Config, run: RunDir, resume: bool):
        wandb = require_wandb()
        id_file = run.wandb_id
        run_id = id_file.read_text(encoding="utf-8").strip() if resume and id_file.is_file() else None
        try:
            self._run = wandb.init(
                project=cfg.wandb_project or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
                entity=cfg.wandb_entity, group=cfg.wandb_group,
                tags=list(cfg.wandb_tags) or None, mode=cfg.wandb_mode,
                name=run.path.name, config=to_dict(cfg),
                id=run_id, resume="allow" if run_id else None)
        except wandb.errors.Error as e:  # no API key, no server: one line, not W&B's traceback
            raise UsageError(f"--wandb: W&B could not start a run: {e} "
                             "(--wandb-mode offline logs without a server)") from None
        self._run.define_metric("env_steps")
        self._run.define_metric("*", step_metric="env_steps")

    def keep_id(self, run: RunDir) -> None:
        """Write the W&B run's id into `run`, for a resume to continue it."""
        with named(run.wandb_id):
            run.wandb_id.write_text(self._run.id + "\n", encoding="utf-8")

    def write(self, env_steps: int, scalars: dict) -> None:
        """One row: `scalars` (name -> number) at `env_steps`."""
        self._run.log({"env_steps": env_steps, **scalars})

    def finish(self, summary: dict | None = None) -> None:
        """End the W&B run: with the run's summary, or (None) as failed."""
        if summary is not None:
            self._run.summary.update(summary)
        self._run.finish(exit_code=0 if summary is not None else 1)
        # finish() can return before W&B's service process has written everything out,
        # and `dac` ends every process under it as it exits (commands/main.py's cli),
        # that one too: teardown waits for the service to end first.
        require_wandb().teardown()
