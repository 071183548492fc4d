"""What one `dac tune` experiment is: its base config, search space, metric, scheduler
and trial resources, written to the experiment directory as tune.yaml so that
`dac tune --resume DIR` continues it with the very same settings. No Ray here.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Literal

import yaml

from distributed_ac.config.schema import Config, from_dict, to_dict
from distributed_ac.core.errors import ConfigError, RunDirError, UsageError
from distributed_ac.run.rundir import STATE_FIELDS
from distributed_ac.tuning.search_space import Dimension, SearchSpace, check_metric

SPEC_FILE = "tune.yaml"
Scheduler = Literal["none", "asha", "pbt"]
TrialWorkers = Literal["serial", "ray"]


@dataclasses.dataclass(frozen=True)
class TuneSpec:
    base: Config
    """The config every trial starts from (env, preset, --config and flags layered)."""
    space: SearchSpace
    metric: str
    mode: Literal["max", "min"] = "max"
    num_samples: int = 1
    scheduler: Scheduler = "none"
    max_concurrent: int = 0  # 0: as many as the cluster's CPUs hold
    report_every: int = 10  # updates between reports (each with a checkpoint)
    grace_period: int = 2  # ASHA: reports before a trial may be stopped
    perturbation_interval: int = 2  # PBT: reports between exploit/explore steps
    trial_workers: TrialWorkers = "serial"

    def check(self) -> None:
        """Refuse settings no trial could run with (one line each), before Ray starts."""
        rules = [(self.num_samples >= 1, "--num-samples must be >= 1"),
                 (self.max_concurrent >= 0, "--max-concurrent must be >= 0 (0 = as many as fit)"),
                 (self.report_every >= 1, "--report-every must be >= 1"),
                 (self.grace_period >= 1 and self.perturbation_interval >= 1,
                  "--grace-period and --perturbation-interval must be >= 1"),
                 # each trial would be a W&B run of its own, started again at every
                 # PBT exploit and Tune restore: not wired up, so refused, not half-done
                 (not self.base.wandb, "--wandb is for dac train: a search does not log "
                                       "to Weights & Biases (each trial's metrics.jsonl "
                                       "and TensorBoard events are in its directory)")]
        for ok, message in rules:
            if not ok:
                raise UsageError(message)
        check_metric(self.metric, self.base)
        if self.scheduler == "pbt":
            grids = [d.field for d in self.space.values() if d.kind == "grid"]
            # an exploit resumes another trial's checkpoint, which a resume refuses then
            nets = [f for f in self.space if f in STATE_FIELDS]
            if grids:
                raise UsageError(f"--scheduler pbt cannot perturb grid dimensions "
                                 f"({', '.join(grids)}): use choice")
            if nets:
                raise UsageError(f"--scheduler pbt copies weights between trials, so it cannot "
                                 f"vary the network or the state its checkpoints hold "
                                 f"({', '.join(nets)})")

    def trial_config(self, sampled: dict) -> Config:
        """The base config with a trial's sampled values (the Config best.yaml holds)."""
        return from_dict(sampled, self.base)

    def workers(self, cfg: Config) -> int:
        """Rollout workers of one trial: the config's count, 1 where it says auto (a trial
        never takes the whole machine)."""
        return cfg.num_workers or 1

    def trial_cpus(self, cfg: Config) -> list[dict]:
        """A trial's placement-group bundles: the learner's CPU, and in ray mode one bundle
        per rollout worker (serial trials step their workers in the learner's process)."""
        if self.trial_workers == "serial":
            return [{"CPU": 1.0}]
        return [{"CPU": 1.0}] + [{"CPU": cfg.worker_cpus}] * self.workers(cfg)

    def planned_reports(self) -> int:
        """Reports a trial makes over its whole budget (ASHA's max_t), at the largest batch
        the space can draw the fewest."""
        cfg = self.base
        steps_per_update = cfg.rollout_length * (cfg.envs_per_worker * (cfg.num_workers or 1)
                                                 if cfg.envs_per_worker else cfg.num_envs)
        return max(1, math.ceil(cfg.total_env_steps / steps_per_update / self.report_every))

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["base"] = to_dict(self.base)
        out["space"] = {n: {d.kind: [list(v) if isinstance(v, tuple) else v for v in d.values]}
                        for n, d in self.space.items()}
        return out

    def save(self, exp_dir: Path) -> None:
        exp_dir.mkdir(parents=True, exist_ok=True)
        (exp_dir / SPEC_FILE).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


def load_spec(exp_dir: Path) -> TuneSpec:
    """The spec of the experiment in `exp_dir` (RunDirError if there is none)."""
    from distributed_ac.tuning.search_space import parse_space

    path = Path(exp_dir) / SPEC_FILE
    if not path.is_file():
        raise RunDirError(f"{exp_dir} is not a dac tune experiment (no {SPEC_FILE})")
    try:
        data = yaml.safe_load(path.read_text())
        base = from_dict(data.pop("base"))
        space = parse_space(data.pop("space"), base, where=str(path))
        return TuneSpec(base=base, space=space, **data)
    except (ConfigError, TypeError, KeyError, AttributeError, yaml.YAMLError) as e:
        raise RunDirError(f"{path} cannot be read: {e}") from None


__all__ = ["TuneSpec", "load_spec", "Dimension"]
