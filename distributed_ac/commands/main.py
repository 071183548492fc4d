"""`dac`: the command line's entry point. It dispatches to a subcommand (train's flags
are commands/train.py; the others' are here, light, with their work in the module of
their name, imported only once the flags are good); flags come from tyro.

Exit codes: 0 success, 2 bad input (config, env, flags, run directory, checkpoint),
1 anything unexpected, 128 + N when `dac train` was stopped by signal N (130 for Ctrl-C,
143 for SIGTERM) after writing its checkpoint, or `dac tune` after writing the results
so far, and 130 for Ctrl-C during start-up. Bad input is reported as one line on
stderr, never as a traceback.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import json
import os
import signal
import sys
from pathlib import Path
from typing import Literal, Optional

# Quiet TensorFlow's C++ start-up chatter before anything imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tyro  # noqa: E402

from distributed_ac.commands.flags import check_writable, parse_flags  # noqa: E402
from distributed_ac.core.errors import BadInput, Interrupted, RunStopped, UsageError  # noqa: E402
from distributed_ac.run.rundir import open_trained  # noqa: E402
from distributed_ac.training.startup import shutdown_ray  # noqa: E402

USAGE = """usage: dac COMMAND [OPTIONS]

commands:
  train     train an agent (dac train --help lists every config field)
  evaluate  run a trained policy on fresh seeds: mean, std, min, max return
  export    write a trained policy as a standalone TensorFlow SavedModel
  plot      draw return against env steps and wall time for one or more runs
  bench     measure env, worker, learner, broadcast and end-to-end throughput
  tune      search hyperparameters over config fields on Ray Tune (dac tune --help)
"""


@dataclasses.dataclass(frozen=True)
class EvaluateArgs:
    run_dir: tyro.conf.Positional[Path]
    """Run directory written by dac train (its newest checkpoint is evaluated)."""
    episodes: int = 100
    """Episodes to run, one after another, each from its own fresh seed."""
    deterministic: tyro.conf.FlagCreatePairsOff[bool] = False
    """Act with the most likely action (argmax / tanh of the Gaussian mean) instead of sampling."""
    video: Optional[Path] = None
    """Record episodes 0, 1, 8, 27, 64, ... as MP4 files in this directory (Gymnasium RecordVideo, or save_video for a PettingZoo env; needs the video extra)."""
    seed: Optional[int] = None
    """Seed of the first episode (episode i uses seed + i); default 2**31 + the training seed, which training never uses."""
    best: tyro.conf.FlagCreatePairsOff[bool] = False
    """Evaluate the run's best checkpoint (best/, kept by dac train --eval-every) instead of its newest."""
    opponent: Optional[Literal["random", "greedy"]] = None
    """A self-play run: the fixed player its games are played against (default: the run's eval_opponent)."""
    checkpoint: Optional[int] = None
    """Evaluate ckpt-N of checkpoints/ (N: its update count; see the folder) instead of the newest readable one."""


def cmd_evaluate(argv: list[str]) -> int:
    args = parse_flags(EvaluateArgs, argv, prog="dac evaluate",
                       description="Run a trained policy on fresh seeds; print its returns.")
    check_checkpoint_choice(args)
    open_trained(args.run_dir, args.best)  # a bad path: before TensorFlow loads
    from distributed_ac import api

    result = api.evaluate(args.run_dir, args.episodes, args.deterministic, args.video,
                          args.seed, args.best, args.opponent, args.checkpoint)
    print(f"{result['episodes']} episodes: mean {result['mean']:.2f}, std {result['std']:.2f}, "
          f"min {result['min']:.2f}, max {result['max']:.2f}", file=sys.stderr)
    print(json.dumps(result), flush=True)
    return 0


def check_checkpoint_choice(args) -> None:
    """--checkpoint N names one of checkpoints/, which --best does not read."""
    if args.checkpoint is not None and args.best:
        raise UsageError("--checkpoint picks one of the run's checkpoints/, --best its best/: "
                         "give one of them")
    if args.checkpoint is not None and args.checkpoint < 0:
        raise UsageError("--checkpoint must be >= 0 (the N of a ckpt-N in checkpoints/)")


@dataclasses.dataclass(frozen=True)
class ExportArgs:
    run_dir: tyro.conf.Positional[Path]
    """Run directory written by dac train (its newest checkpoint is exported)."""
    out: Path
    """Directory for the SavedModel (new or empty, or a previous export to replace)."""
    best: tyro.conf.FlagCreatePairsOff[bool] = False
    """Export the run's best checkpoint (best/, kept by dac train --eval-every) instead of its newest."""
    policy: Optional[str] = None
    """A run with separate policies (policy_mapping): the policy to export; needed there, refused elsewhere."""
    checkpoint: Optional[int] = None
    """Export ckpt-N of checkpoints/ (N: its update count; see the folder) instead of the newest readable one."""
    format: Literal["savedmodel", "onnx"] = "savedmodel"
    """savedmodel: OUT is the SavedModel. onnx (pip install 'distributed_ac[onnx]'): OUT/saved_model plus OUT/action.onnx and OUT/value.onnx, converted by tf2onnx."""


def cmd_export(argv: list[str]) -> int:
    args = parse_flags(ExportArgs, argv, prog="dac export",
                       description="Write a trained policy as a standalone TensorFlow SavedModel.")
    check_checkpoint_choice(args)
    open_trained(args.run_dir, args.best)  # a bad path is reported before TensorFlow loads
    onnx = args.format == "onnx"
    if onnx:
        from distributed_ac.trained.onnx import require_tf2onnx

        require_tf2onnx()  # a missing extra is reported before TensorFlow loads
    saved = args.out / "saved_model" if onnx else args.out
    check_writable(saved / "saved_model.pb", "--out")
    from distributed_ac.learning.tf_runtime import load_tensorflow

    load_tensorflow()  # its C++ start-up lines held back (tf_runtime.py)
    from distributed_ac import api

    info = api.export(args.run_dir, args.out, args.best, args.policy, args.checkpoint,
                      args.format)
    print(json.dumps(info), flush=True)
    return 0


@dataclasses.dataclass(frozen=True)
class PlotArgs:
    run_dirs: tyro.conf.Positional[tuple[Path, ...]]
    """One or more run directories; several are drawn on one figure for comparison."""
    out: Path = Path("curve.png")
    """Image to write; the format follows the suffix (png, svg, pdf)."""


def cmd_plot(argv: list[str]) -> int:
    args = parse_flags(PlotArgs, argv, prog="dac plot",
                       description="Draw return against env steps and against wall time.")
    if not args.run_dirs:
        raise UsageError("dac plot needs at least one run directory")
    if args.out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--out {args.out}: the image must end in .png, .svg or .pdf")
    check_writable(args.out, "--out")
    from distributed_ac.commands.plot import plot

    print(json.dumps(plot(list(args.run_dirs), args.out)), flush=True)
    return 0


def cmd_bench(argv: list[str]) -> int:
    from distributed_ac.commands.bench import (
        main as bench_main,  # TF/Ray load only if a phase needs them
    )

    return bench_main(argv)


def cmd_train(argv: list[str]) -> int:
    from distributed_ac.commands.train import run  # its flags' module, then the trainer

    return run(argv)


def cmd_tune(argv: list[str]) -> int:
    from distributed_ac.commands.tune import run  # its flags' module; Ray Tune loads later

    return run(argv)


COMMANDS = {"train": cmd_train, "evaluate": cmd_evaluate, "export": cmd_export,
            "plot": cmd_plot, "bench": cmd_bench, "tune": cmd_tune}


def report_crashes_from_every_thread() -> None:
    """A native crash (SIGSEGV in TensorFlow, Ray or NumPy) prints the Python stack of
    every thread, the faulting one marked "Current thread". Ray would otherwise enable
    the handler for the faulting thread alone, which does not say which of ours it was.
    Where something enabled it already (pytest does), or stderr is None or not a real
    file, it is left as it is."""
    if faulthandler.is_enabled():
        return
    try:
        faulthandler.enable(all_threads=True)
    # None: RuntimeError; no fileno(): AttributeError or io.UnsupportedOperation (an
    # OSError); a negative one: ValueError
    except (RuntimeError, AttributeError, OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    report_crashes_from_every_thread()
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if argv else 2
    command = COMMANDS.get(argv[0])
    try:
        if command is None:
            raise UsageError(f"unknown command '{argv[0]}' (commands: {', '.join(COMMANDS)})")
        return command(argv[1:])
    except BadInput as e:  # ConfigError, EnvError, RunDirError, ClusterError, DeviceError, ...
        print(f"dac: error: {e}", file=sys.stderr)
        return 2
    except RunStopped as e:  # the run could not go on; its last checkpoint stays usable
        print(f"dac: run stopped: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a file the OS refused mid-way (disk full, permissions changed)
        print(f"dac: error: {e}", file=sys.stderr)
        return 1
    except Interrupted as e:  # a stop signal while `dac train` (or a search) started up
        print("dac: interrupted", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:  # Ctrl-C in any other command, or before train's handlers
        print("dac: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    finally:
        shutdown_ray()


def cli() -> int:
    """The `dac` process: `main`, and no process of its own left when it ends. It adopts
    what its children leave (a killed raylet's workers), ends whatever is still under it
    as it exits, and a stop signal that is not acted on within stop_timeout_s ends it
    (signals.StopSignals). Only here, not in `main`, which tests call in-process."""
    from distributed_ac.core.processes import adopt_orphans, end_descendants
    from distributed_ac.training.signals import exit_when_overdue

    adopt_orphans()
    exit_when_overdue()
    try:
        return main()
    finally:
        end_descendants()


if __name__ == "__main__":
    sys.exit(cli())
