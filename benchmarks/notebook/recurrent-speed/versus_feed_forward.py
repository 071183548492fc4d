"""End-to-end env steps/s of a recurrent run beside the feed-forward run on the same env
and preset, in interleaved rounds: one JSON line per run, then one with the medians and
their ratios.

    python benchmarks/notebook/recurrent-speed/versus_feed_forward.py
    python benchmarks/notebook/recurrent-speed/versus_feed_forward.py --rounds 3 --workers 1 \
        --variant before="--core lstm --recurrent-minibatch-size 64 --learner-threads 1"

Each run is `dac train --env ENV --num-workers W --total-env-steps STEPS --seed 0` plus
the variant's flags, on an embedded local Ray, one at a time. A run's figure is its
training rate, env steps over the training wall time of its last metrics row (start-up
not counted, as the progress line counts it). The variants, in each round's order:
feed-forward (no flags), lstm (`--core lstm`) and those given by --variant NAME="FLAGS".
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

NOVEL = "distributed_ac.envs.memory:CartPoleNoVel"


def run_once(env: str, workers: int, steps: int, flags: list[str], run_dir: Path) -> dict:
    cmd = [sys.executable, "-m", "distributed_ac", "train", "--env", env, "--num-workers", str(workers), "--total-env-steps",
           str(steps), "--seed", "0", "--run-dir", str(run_dir), *flags]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    return {"env_steps": last["env_steps"], "wall_s": round(last["wall_s"], 2),
            "steps_per_s": round(last["env_steps"] / last["wall_s"]),
            "mean_return_100": last.get("charts/mean_return_100")}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default=NOVEL)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--variant", action="append", default=[], metavar='NAME="FLAGS"')
    args = p.parse_args(argv)
    variants = {"feed_forward": [], "lstm": ["--core", "lstm"]}
    for v in args.variant:
        name, _, flags = v.partition("=")
        variants[name] = shlex.split(flags)
    rates: dict[str, list[int]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, flags in variants.items():
                out = run_once(args.env, args.workers, args.steps, flags,
                               Path(tmp) / f"{name}-{r}")
                rates[name].append(out["steps_per_s"])
                print(json.dumps({"benchmark": "recurrent_versus_feed_forward", "env": args.env,
                                  "workers": args.workers, "variant": name, "flags": flags,
                                  "round": r, **out}), flush=True)
    medians = {name: statistics.median(v) for name, v in rates.items()}
    base = medians["feed_forward"]
    print(json.dumps({"benchmark": "recurrent_versus_feed_forward", "env": args.env,
                      "workers": args.workers, "median_steps_per_s": medians,
                      "against_feed_forward": {k: round(v / base, 3) for k, v in medians.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
