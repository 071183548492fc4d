"""Invalid-action masking on MaskedChoice: trained with the mask, and with it ignored.

    python benchmarks/notebook/action-spaces/masking.py --seeds 0 1 2 [--out FILE]

Each run is `dac train --config benchmarks/spaces/masked-choice.yaml --seed S` (an
embedded local Ray, the default worker count), masked with `--stop-at-return 15.2` (95%
of the optimum: env steps and wall seconds to it), ignored with `--ignore-action-mask`
for the whole budget. The policy each run ends with then plays 100 episodes (sampling,
the mask applied as in training) on fresh seeds, counting illegal actions through the
env's own counter. One JSON line a run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]  # benchmarks/notebook/NOTE/
CONFIG = ROOT / "benchmarks" / "spaces" / "masked-choice.yaml"
OUT = ROOT / "benchmarks" / "results" / "masking.jsonl"
TARGET = 15.2


def play(run_dir: Path, episodes: int = 100) -> dict:
    """Illegal actions a step and the mean return of the run's policy on fresh seeds."""
    from distributed_ac.acting.numpy_policy import Policy
    from distributed_ac.trained.load import load_trained
    from distributed_ac.envs.choices import MaskedChoice

    _, space, learner, _ = load_trained(run_dir)
    policy = Policy(space, learner.spec)
    policy.load(learner.weights())
    env, rng, total, steps = MaskedChoice(), np.random.default_rng(0), 0.0, 0
    for i in range(episodes):
        obs, _ = env.reset(seed=2**31 + i)
        done = False
        while not done:
            _, action, _ = policy.act(space.as_batch(obs, 1), rng, legal=space.action_masks(obs, 1))
            obs, reward, term, trunc, _ = env.step(action[0])
            total, steps, done = total + reward, steps + 1, term or trunc
    return {"illegal_per_step": env.illegal_taken / steps, "play_mean_return": total / episodes}


def run(seed: int, ignore: bool) -> dict:
    flags = ["--ignore-action-mask"] if ignore else ["--stop-at-return", str(TARGET)]
    with tempfile.TemporaryDirectory(prefix="dac-mask-") as tmp:
        out = subprocess.run([sys.executable, "-m", "distributed_ac", "train", "--config",
                              str(CONFIG), "--seed", str(seed), "--run-dir", f"{tmp}/run",
                              *flags], capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            raise SystemExit(f"dac train failed: {out.stderr.strip().splitlines()[-1:]}")
        s = json.loads(out.stdout.strip().splitlines()[-1])
        played = play(Path(tmp) / "run")
    return {"seed": seed, "mask": "ignored" if ignore else "applied", "workers": s["workers"],
            "env_steps": s["env_steps"], "mean_return_100": s["mean_return_100"],
            "solved": s["solved"], "wall_s": s["wall_s"], **played}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args()
    for seed in a.seeds:
        for ignore in (False, True):
            row = run(seed, ignore)
            with a.out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
