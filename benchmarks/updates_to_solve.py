"""Updates and env steps to a 100-episode mean of 475, per seed, for config variants.

Runs in serial async mode: one in-process worker at policy lag 1, which makes exactly the
updates one async Ray worker makes, so the counts are deterministic per seed and the
machine's speed does not enter. Wall time to solve is then about updates x the time of
one update (benchmarks/solve_time.py measures that). One JSON line per variant:

    python benchmarks/updates_to_solve.py --seeds 0 1 2 3 4 5 \\
        --variant base= --variant noadv="--no-normalize-advantages --reward-scale 0.3"

A variant is NAME=FLAGS: `dac train` flags on top of --config (cartpole_fast.yaml).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shlex
import statistics
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))


def solve(config: str, flags: list[str], seed: int, budget: int) -> dict:
    from distributed_ac.bench.phases import (
        Recorder,  # quiet: the JSON lines stay readable
    )
    from distributed_ac.commands.train import parse_train_args
    from distributed_ac.training.trainer import train

    args = parse_train_args(["--config", config, "--serial", "--mode", "async", "--seed",
                             str(seed), "--total-env-steps", str(budget),
                             "--stop-at-return", "475", *flags])
    with tempfile.TemporaryDirectory(prefix="dac-updates-") as tmp:
        s = train(args.cfg, progress=Recorder(), run_dir=os.path.join(tmp, "run"))
    return {"seed": seed, "solved": s["solved"], "updates": s["updates"],
            "env_steps": s["env_steps"]}


def _finite(x: float):
    """None for 'not reached on enough seeds' (JSON has no infinity)."""
    return None if math.isinf(x) else x


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=os.path.join(HERE, "cartpole_fast.yaml"))
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(6)))
    p.add_argument("--budget", type=int, default=700_000, help="env steps before giving up")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS")
    a = p.parse_args(argv)
    for spec in a.variant or ["config="]:
        name, _, flags = spec.partition("=")
        logging.disable(logging.WARNING)  # no per-run warnings between the JSON lines
        try:
            runs = [solve(a.config, shlex.split(flags), s, a.budget) for s in a.seeds]
        finally:
            logging.disable(logging.NOTSET)
        steps = [r["env_steps"] if r["solved"] else float("inf") for r in runs]
        print(json.dumps({"benchmark": "updates_to_solve", "variant": name, "flags": flags,
                          "solved": sum(r["solved"] for r in runs), "seeds": len(runs),
                          "median_env_steps": _finite(statistics.median(steps)),
                          "max_env_steps": _finite(max(steps)), "runs": runs}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
