"""Learning quality side by side: `dac train` and Stable-Baselines3 PPO (rl-zoo settings)
on the same env, seeds and budget, on this machine, one run at a time.

    python benchmarks/quality.py run --env LunarLander-v3 --seeds 0 1 2 \
        --steps 1000000 --peers-python /tmp/peers-venv/bin/python
    python benchmarks/quality.py plot --env LunarLander-v3

`run` appends one JSON line per run to benchmarks/results/quality.jsonl (who, env, seed,
env steps, the 100-episode mean of raw returns at the end of the budget, wall seconds)
and writes each run's curve (env_steps, wall_s, mean_return_100) as a CSV under
benchmarks/results/quality/. Ours runs `dac train --env ENV` with the env's preset and
one worker (this machine's default, 2 cores); extra flags go after `--`. SB3 runs
benchmarks/peers/sb3_ppo.py in its own virtual environment (benchmarks/peers/README.md)
with one torch thread. `plot` draws every curve of an env on one PNG.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CURVES = RESULTS / "quality"
PEER = ROOT / "benchmarks" / "peers" / "sb3_ppo.py"


def run_ours(env: str, seed: int, steps: int, flags: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="dac-quality-") as tmp:
        cmd = [sys.executable, "-m", "distributed_ac", "train", "--env", env, "--seed",
               str(seed), "--num-workers", "1", "--total-env-steps", str(steps),
               "--run-dir", f"{tmp}/run", *flags]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            raise SystemExit(f"dac train failed: {out.stderr.strip().splitlines()[-1:]}")
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        rows = [json.loads(x) for x in Path(f"{tmp}/run/metrics.jsonl").read_text().splitlines()]
    curve = CURVES / f"{env}-ours-s{seed}.csv"
    with open(curve, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["env_steps", "wall_s", "mean_return_100"])
        for r in rows:
            if r.get("charts/mean_return_100") is not None:
                w.writerow([r["env_steps"], r["wall_s"], r["charts/mean_return_100"]])
    return {"who": "dac", "env": env, "seed": seed, "env_steps": summary["env_steps"],
            "mean_return_100": summary["mean_return_100"], "wall_s": summary["wall_s"],
            "steps_per_s": summary["steps_per_s"], "flags": flags, "curve": str(curve.relative_to(ROOT))}


def run_peer(python: str, env: str, seed: int, steps: int) -> dict:
    curve = CURVES / f"{env}-sb3ppo-s{seed}.csv"
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
        subprocess.run([python, str(PEER), "--env", env, "--steps", str(steps), "--seed",
                        str(seed), "--out", out.name, "--curve", str(curve)], check=True)
        line = json.loads(Path(out.name).read_text().splitlines()[-1])
    return {"who": "sb3-ppo", "env": env, "seed": seed, "env_steps": line["env_steps"],
            "mean_return_100": line["mean_return_100"], "wall_s": line["wall_s"],
            "steps_per_s": line["steps_per_s"], "versions": line["versions"],
            "curve": str(curve.relative_to(ROOT))}


def plot(env: str) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.5), layout="constrained")
    by_steps, by_time = fig.subplots(1, 2, sharey=True)
    colors = {"ours": "tab:blue", "sb3ppo": "tab:orange"}
    for path in sorted(CURVES.glob(f"{env}-*-s*.csv")):
        who = path.stem.split("-")[-2]
        rows = list(csv.DictReader(open(path)))
        steps = [int(float(r["env_steps"])) for r in rows]
        wall = [float(r["wall_s"]) for r in rows]
        ret = [float(r["mean_return_100"]) if r["mean_return_100"] else float("nan") for r in rows]
        label = ("dac train" if who == "ours" else "SB3 PPO (rl-zoo)") + f", {path.stem.split('-')[-1]}"
        for ax, x in ((by_steps, steps), (by_time, wall)):
            ax.plot(x, ret, color=colors.get(who), alpha=0.8, label=label)
    by_steps.set(xlabel="env steps", ylabel="100-episode mean return", title=f"{env}: return vs env steps")
    by_time.set(xlabel="wall time (s), 2-core machine", title="return vs wall time")
    for ax in (by_steps, by_time):
        ax.grid(alpha=0.3)
    by_steps.legend(fontsize="small")
    out = RESULTS / f"quality-{env}.png"
    fig.savefig(out, dpi=90)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["run", "plot"])
    p.add_argument("--env", required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--who", choices=["both", "dac", "sb3"], default="both")
    p.add_argument("--peers-python", default="/tmp/peers-venv/bin/python")
    args, flags = p.parse_known_args()
    flags = [f for f in flags if f != "--"]
    if args.what == "plot":
        print(plot(args.env))
        return
    CURVES.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:  # each line is written as soon as its run ends
        if args.who in ("both", "dac"):
            emit(run_ours(args.env, seed, args.steps, flags))
        if args.who in ("both", "sb3"):
            emit(run_peer(args.peers_python, args.env, seed, args.steps))


def emit(record: dict) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    with open(RESULTS / "quality.jsonl", "a") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
