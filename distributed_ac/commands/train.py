"""`dac train`: its flags (the Config's fields, then the run's own), the preset a run
starts from, and the run. The trainer's heavy imports wait until the flags are good."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path
from typing import Annotated, Optional

import tyro

from distributed_ac.commands.flags import flag_value, flag_values, parse_flags
from distributed_ac.config.schema import Config, load_yaml
from distributed_ac.core.errors import UsageError
from distributed_ac.run.rundir import open_run, saved_config
from distributed_ac.training import presets as starting


@dataclasses.dataclass(frozen=True)
class TrainArgs:
    cfg: Annotated[Config, tyro.conf.arg(name="")]
    config: Optional[Path] = None
    """YAML file of config fields; command-line flags override it."""
    address: Optional[str] = None
    """Ray cluster to join: HOST:PORT, ray://HOST:PORT, or 'auto' (the cluster RAY_ADDRESS names, else the one `ray start` started on this machine; never another job's Ray); default: start an embedded local Ray on this machine."""
    dashboard: tyro.conf.FlagCreatePairsOff[bool] = False
    """Start Ray's dashboard (local mode; bound to 127.0.0.1)."""
    run_dir: Optional[Path] = None
    """Run directory to write (config, checkpoints, TensorBoard events, metrics.jsonl); default runs/<env>-<time>."""
    resume: Optional[Path] = None
    """Continue the run in this directory from its newest checkpoint; its config.yaml is the base config, flags may override all but the network."""
    overwrite: tyro.conf.FlagCreatePairsOff[bool] = False
    """Replace the run already in --run-dir instead of refusing."""
    no_preset: tyro.conf.FlagCreatePairsOff[bool] = False
    """Start from the package base (the Config field defaults), not from the settings shipped for --env or, for an env without a file, presets/default.yaml (distributed_ac/config/presets/)."""


def train_preset(argv: list[str]) -> Path | None:
    """The preset a new run starts from: the one shipped for its env (--env, else
    --config's env, else the default env), or the default preset for an env without
    one; None with --no-preset or --resume."""
    return _preset(argv)[0]


def _preset(argv: list[str]) -> tuple[Path | None, str]:
    """(train_preset, the name of the env it was found by: the one given, or for an
    entry point the spec.id or PettingZoo name of what it makes)."""
    if flag_value(argv, "--resume") or "--no-preset" in argv:
        return None, ""
    path = flag_value(argv, "--config")
    loaded = load_yaml(path) if path else Config()
    env = flag_value(argv, "--env") or loaded.env
    return starting.preset_for(env, tuple(flag_values(argv, "--gym-packages") or loaded.gym_packages))


def parse_train_args(argv: list[str]) -> TrainArgs:
    """Defaults (or, with --resume, the run's saved config), then the env's preset, then
    --config's YAML, then flags."""
    resume = flag_value(argv, "--resume")
    base = saved_config(open_run(resume)) if resume else Config()
    preset = train_preset(argv)
    if preset:
        base = load_yaml(preset, base)
    path = flag_value(argv, "--config")
    if path:
        base = load_yaml(path, base)
    args = parse_flags(TrainArgs, argv, default=TrainArgs(cfg=base), prog="dac train",
                       description="Train an actor-critic agent on Ray rollout workers.")
    if args.resume and (args.run_dir or args.overwrite):
        raise UsageError("--resume names the run directory itself; drop --run-dir / --overwrite")
    return args


def preset_note(argv: list[str], env: str) -> str | None:
    """The line that names the preset a new run started from (None: it started from none)."""
    return starting.preset_note(*_preset(argv), env)


def run(argv: list[str]) -> int:
    """`dac train ARGV`: train, print the summary as one JSON line, return the exit code."""
    args = parse_train_args(argv)
    from distributed_ac import api  # TensorFlow and Ray load inside api.train

    # the Config is whole here (defaults, preset, YAML, flags); the API trains it as given
    summary = api.train(config=args.cfg, run_dir=args.run_dir, resume=args.resume,
                        overwrite=args.overwrite, address=args.address,
                        dashboard=args.dashboard,
                        note=preset_note(argv, args.cfg.env)).summary
    print(json.dumps(summary), flush=True)
    if summary["stopped_by"] == "callback":  # a callback ended it: a clean end
        return 0
    if summary["stopped_by"]:  # checkpointed and shut down cleanly, but not finished
        return 128 + signal.Signals[summary["stopped_by"]].value
    return 0
