"""`dac`: the command line. Each subcommand is a small function; flags come from tyro.

Exit codes: 0 success, 2 bad input (config, env, flags), 1 anything unexpected.
Bad input is reported as one line on stderr, never as a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

# Quiet TensorFlow's C++ start-up chatter before anything imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tyro  # noqa: E402

from distributed_ac.config import Config, ConfigError, load_yaml  # noqa: E402
from distributed_ac.envs import EnvError  # noqa: E402
from distributed_ac.errors import RunStopped  # noqa: E402

USAGE = """usage: dac COMMAND [OPTIONS]

commands:
  train     train an agent (dac train --help lists every config field)
  bench     measure env, worker, learner, broadcast and end-to-end throughput
"""


class UsageError(Exception):
    """Bad command-line input; one line for the user."""


@dataclasses.dataclass(frozen=True)
class TrainArgs:
    cfg: Annotated[Config, tyro.conf.arg(name="")]
    config: Optional[Path] = None
    """YAML file of config fields; command-line flags override it."""
    address: Optional[str] = None
    """Ray cluster to join (e.g. 'auto' inside a cluster job); default: start an embedded local Ray on this machine."""
    dashboard: bool = False
    """Start Ray's dashboard (local mode; bound to 127.0.0.1)."""


def _flag_value(argv: list[str], flag: str) -> str | None:
    for i, a in enumerate(argv):
        if a == flag:
            if i + 1 >= len(argv):
                raise UsageError(f"{flag} needs a value")
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def parse_train_args(argv: list[str]) -> TrainArgs:
    """Defaults, then the YAML file named by --config, then the flags."""
    path = _flag_value(argv, "--config")
    base = load_yaml(path) if path else Config()
    return tyro.cli(TrainArgs, default=TrainArgs(cfg=base), args=argv, prog="dac train",
                    description="Train an actor-critic agent on Ray rollout workers.")


def cmd_train(argv: list[str]) -> int:
    args = parse_train_args(argv)
    from distributed_ac.train import train  # heavy imports only once the flags are good

    summary = train(args.cfg, address=args.address, dashboard=args.dashboard)
    print(json.dumps(summary), flush=True)
    return 0


def cmd_bench(argv: list[str]) -> int:
    from distributed_ac.bench import main as bench_main  # TF/Ray load only if a phase needs them

    return bench_main(argv)


COMMANDS = {"train": cmd_train, "bench": cmd_bench}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if argv else 2
    command = COMMANDS.get(argv[0])
    try:
        if command is None:
            raise UsageError(f"unknown command '{argv[0]}' (commands: {', '.join(COMMANDS)})")
        return command(argv[1:])
    except (ConfigError, EnvError, UsageError) as e:
        print(f"dac: error: {e}", file=sys.stderr)
        return 2
    except RunStopped as e:  # the run could not go on; its last checkpoint stays usable
        print(f"dac: run stopped: {e}", file=sys.stderr)
        return 1
    finally:
        _shutdown_ray()


def _shutdown_ray() -> None:
    if "ray" in sys.modules:
        from distributed_ac import distributed

        distributed.shutdown()


if __name__ == "__main__":
    sys.exit(main())
