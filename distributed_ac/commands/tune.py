"""`dac tune`: hyperparameter search over Config fields on Ray Tune.

The base config is layered as for `dac train` (defaults, the env's preset, --config,
flags); the search space, metric and scheduler are checked against it, and every bad
input is one line and exit code 2 before Ray starts. Ray Tune itself loads only then.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Literal, Optional

import tyro

from distributed_ac.commands.flags import check_writable, flag_value, parse_flags
from distributed_ac.commands.train import train_preset
from distributed_ac.config.schema import Config, load_yaml
from distributed_ac.core.errors import RunDirError, UsageError
from distributed_ac.training.startup import shutdown_ray
from distributed_ac.tuning.search_space import default_metric, load_space
from distributed_ac.tuning.experiment_spec import SPEC_FILE, TuneSpec, load_spec


@dataclasses.dataclass(frozen=True)
class TuneArgs:
    cfg: Annotated[Config, tyro.conf.arg(name="")]
    space: Optional[Path] = None
    """YAML search space: config field -> {choice | grid: [values]} or {uniform | loguniform: [low, high]}, optionally with start: value (every trial's first value; PBT explores from it)."""
    config: Optional[Path] = None
    """YAML file of config fields for every trial; command-line flags override it."""
    metric: Optional[str] = None
    """Metric to optimise; default eval/mean_return when the config evaluates during training, else charts/mean_return_100."""
    metric_mode: Literal["max", "min"] = "max"
    """Whether the metric is to be maximised or minimised."""
    num_samples: int = 4
    """Trials drawn from the space (each grid point gets this many)."""
    scheduler: Literal["none", "asha", "pbt"] = "none"
    """none: every trial runs its whole budget; asha: stop the trials behind early; pbt: population-based training (exploit and explore every --perturbation-interval reports)."""
    max_concurrent: int = 0
    """Trials running at once; 0 = as many as the cluster's CPUs hold."""
    report_every: int = 10
    """Updates between a trial's reports to Tune (each comes with a checkpoint)."""
    grace_period: int = 2
    """ASHA: reports a trial makes before it may be stopped."""
    perturbation_interval: int = 2
    """PBT: reports between exploit/explore steps."""
    trial_workers: Literal["serial", "ray"] = "serial"
    """Where a trial's num_workers rollout workers run: serial = in the trial's process on its one CPU; ray = Ray actors in the trial's placement group, one bundle each."""
    exp_dir: Optional[Path] = None
    """Experiment directory (Tune's state, trials, results); default runs/tune-<env>-<time>."""
    resume: Optional[Path] = None
    """Continue the interrupted experiment in this directory with its own settings."""
    address: Optional[str] = None
    """Ray cluster to join; default: start an embedded local Ray on this machine."""
    no_preset: tyro.conf.FlagCreatePairsOff[bool] = False
    """Start from the package base, not the preset shipped for --env."""


def parse_tune_args(argv: list[str]) -> TuneArgs:
    """Defaults, then the env's preset, then --config, then flags (as `dac train`)."""
    base = Config()
    preset = train_preset([a for a in argv if not a.startswith("--resume")])
    if preset:
        base = load_yaml(preset, base)
    path = flag_value(argv, "--config")
    if path:
        base = load_yaml(path, base)
    return parse_flags(TuneArgs, argv, default=TuneArgs(cfg=base), prog="dac tune",
                       description="Search hyperparameters over Config fields on Ray Tune.")


def make_spec(args: TuneArgs) -> TuneSpec:
    if args.space is None:
        raise UsageError("dac tune needs --space FILE (or --resume DIR)")
    spec = TuneSpec(base=args.cfg, space=load_space(args.space, args.cfg),
                    metric=args.metric or default_metric(args.cfg), mode=args.metric_mode,
                    num_samples=args.num_samples, scheduler=args.scheduler,
                    max_concurrent=args.max_concurrent, report_every=args.report_every,
                    grace_period=args.grace_period,
                    perturbation_interval=args.perturbation_interval,
                    trial_workers=args.trial_workers)
    spec.check()
    return spec


def experiment_dir(args: TuneArgs) -> Path:
    """A new experiment's directory: refused if it already holds one."""
    path = args.exp_dir or Path("runs") / f"tune-{args.cfg.env.replace('/', '_')}-" \
                                          f"{time.strftime('%Y%m%d-%H%M%S')}"
    if (path / SPEC_FILE).exists():
        raise RunDirError(f"{path} already holds an experiment; continue it with --resume {path}")
    check_writable(path / SPEC_FILE, "--exp-dir")
    return path


def run(argv: list[str]) -> int:
    """`dac tune ARGV`: search, write the outputs, print the table and a JSON summary;
    stopped by a signal (Tune's graceful stop), the same with what ran, and 128 + N."""
    args = parse_tune_args(argv)
    if args.resume:
        exp_dir, spec = args.resume, load_spec(args.resume)
    else:
        spec = make_spec(args)
        exp_dir = experiment_dir(args)
        spec.save(exp_dir)
    from distributed_ac.pool import ray_pool

    ray_pool.load(local=not args.address)  # before Tune imports Ray: loopback when local
    from distributed_ac.tuning import experiment, results

    trials, stopped_by = experiment.run(spec, exp_dir, args.address,
                                        resume=args.resume is not None)
    summary = {**results.write_outputs(trials, spec, exp_dir),
               "stopped_by": stopped_by.name if stopped_by else None}
    rows = results.trial_rows(trials, spec)
    print(results.table(rows, spec, results.best_index(rows, spec)), file=sys.stderr)
    shutdown_ray()
    if stopped_by:  # after Ray's last words, so that this line ends stderr
        print(f"dac: interrupted by {stopped_by.name}: the results so far are in {exp_dir}; "
              f"continue the search with: dac tune --resume {exp_dir}", file=sys.stderr)
    print(json.dumps(summary), flush=True)
    if stopped_by:  # as `dac train` stopped by a signal: a script tells it from an end
        return 128 + stopped_by.value
    return 0 if summary["best_trial"] is not None else 1
