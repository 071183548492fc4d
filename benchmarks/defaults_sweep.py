"""Which settings should an env without a preset start from? Each candidate in
benchmarks/defaults/ trains every env of a suite with `--no-preset`, and the final
100-episode mean of each run is scored between a random policy (0) and a solved one (1).

    python benchmarks/defaults_sweep.py run --candidates pg ppo-norm --seeds 0
    python benchmarks/defaults_sweep.py table

`run` appends one JSON line per run to benchmarks/results/defaults-sweep.jsonl; `table`
prints each run's final mean per candidate and env, and each candidate's mean score over
the envs (a run's score capped at 1: beyond solved is not more robust). Runs use one
worker, like the quality benchmark; pin the process (taskset) when something else shares
the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ROOT / "benchmarks" / "defaults"
OUT = ROOT / "benchmarks" / "results" / "defaults-sweep.jsonl"

# env: (budget, random-policy return, solved return) -- the score's 0 and 1
SUITE = {
    "CartPole-v1": (500_000, 22.0, 475.0),
    "Acrobot-v1": (300_000, -500.0, -100.0),
    "Pendulum-v1": (300_000, -1200.0, -200.0),
    "LunarLander-v3": (1_000_000, -180.0, 200.0),
    "LunarLanderContinuous-v3": (1_000_000, -180.0, 200.0),
    "Hopper-v5": (1_000_000, 20.0, 2500.0),
}


def score(env: str, mean: float | None) -> float:
    _, lo, hi = SUITE[env]
    return 0.0 if mean is None else (mean - lo) / (hi - lo)


def run_one(candidate: str, env: str, seed: int) -> dict:
    steps = SUITE[env][0]
    with tempfile.TemporaryDirectory(prefix="dac-defaults-") as tmp:
        cmd = [sys.executable, "-m", "distributed_ac", "train", "--no-preset",
               "--config", str(CANDIDATES / f"{candidate}.yaml"), "--env", env,
               "--seed", str(seed), "--num-workers", "1", "--total-env-steps", str(steps),
               "--run-dir", f"{tmp}/run"]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        return {"candidate": candidate, "env": env, "seed": seed,
                "error": out.stderr.strip().splitlines()[-1:]}
    s = json.loads(out.stdout.strip().splitlines()[-1])
    return {"candidate": candidate, "env": env, "seed": seed, "env_steps": s["env_steps"],
            "mean_return_100": s["mean_return_100"], "score": score(env, s["mean_return_100"]),
            "wall_s": s["wall_s"]}


def table() -> None:
    print("\n".join(table_lines([json.loads(x) for x in OUT.read_text().splitlines()])))


def table_lines(rows: list[dict]) -> list[str]:
    """The markdown table `table` prints (the docs' results pages too): each run's final
    mean per candidate and env of SUITE, and each candidate's mean score."""
    cands = sorted({r["candidate"] for r in rows})
    lines = ["| env | " + " | ".join(cands) + " |", "| --- |" + " --- |" * len(cands)]
    per = {c: [] for c in cands}
    for env in SUITE:
        cells = []
        for c in cands:
            got = [r for r in rows if r["candidate"] == c and r["env"] == env and "score" in r]
            if got:
                per[c].append(statistics.mean(min(1.0, r["score"]) for r in got))  # solved is 1
            cells.append(", ".join(f"{r['mean_return_100']:.0f}" if r["mean_return_100"] is not None
                                   else "none" for r in got) or "-")
        lines.append(f"| {env} | " + " | ".join(cells) + " |")
    means = [f"{statistics.mean(per[c]):.2f} ({len(per[c])} envs)" if per[c] else "-"
             for c in cands]
    lines.append("| mean score (0 random, 1 solved) | " + " | ".join(means) + " |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["run", "table"])
    p.add_argument("--candidates", nargs="+", default=["pg", "ppo-norm"])
    p.add_argument("--envs", nargs="+", default=list(SUITE), choices=list(SUITE))
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = p.parse_args()
    if args.what == "table":
        return table()
    for seed in args.seeds:
        for env in args.envs:
            for cand in args.candidates:
                line = run_one(cand, env, seed)
                print(json.dumps(line), flush=True)
                with open(OUT, "a") as f:
                    f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
