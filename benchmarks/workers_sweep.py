"""Learning at every worker count: each shipped preset at W workers, seeds, its budget.

    python benchmarks/workers_sweep.py run --envs Pendulum-v1 LunarLander-v3 \
        --workers 1 2 4 8 --seeds 0 1 2 [--out FILE] [-- extra dac train flags]
    python benchmarks/workers_sweep.py table [--out FILE]

`run` trains `dac train --env ENV --num-workers W --seed S` (the env's preset and its
budget, an embedded local Ray) one run at a time and appends one JSON line per run:
the 100-episode mean at the end of the budget, updates, policy lag (p50, p95, max),
dropped batches, how long the workers waited, wall seconds, and the commit. A run
already in the file (same env, W, seed and flags) is skipped, so an interrupted sweep
continues where it stopped. `table` prints the markdown table the notes quote;
`table()` and `peer_table()` also write the docs' results tables (docs/hooks/results_tables.py).
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
OUT = ROOT / "benchmarks" / "results" / "workers-sweep.jsonl"


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=ROOT)
    return out.stdout.strip() or "unknown"


def run_one(env: str, workers: int, seed: int, flags: list[str]) -> dict:
    at = commit()  # what the run started from, should a commit land while it trains
    with tempfile.TemporaryDirectory(prefix="dac-workers-") as tmp:
        cmd = [sys.executable, "-m", "distributed_ac", "train", "--env", env,
               "--num-workers", str(workers), "--seed", str(seed), "--run-dir", f"{tmp}/run",
               *flags]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"dac train failed: {out.stderr.strip().splitlines()[-1:]}")
    s = json.loads(out.stdout.strip().splitlines()[-1])
    keep = ("env_steps", "updates", "mean_return_100", "batches_per_update", "policy_lag_p50",
            "policy_lag_p95", "max_policy_lag", "dropped_batches", "worker_wait_pct",
            "wall_s", "steps_per_s")
    return {"env": env, "workers": workers, "seed": seed, "flags": flags,
            **{k: s[k] for k in keep}, "commit": at}


def load(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def cmd_run(args) -> None:
    done = {(r["env"], r["workers"], r["seed"], tuple(r["flags"])) for r in load(args.out)}
    for env in args.envs:
        for workers in args.workers:
            for seed in args.seeds:
                if (env, workers, seed, tuple(args.flags)) in done:
                    continue
                rec = run_one(env, workers, seed, args.flags)
                with open(args.out, "a") as f:
                    f.write(json.dumps(rec) + "\n")
                print(json.dumps(rec), flush=True)


def cmd_table(args) -> None:
    print("\n".join(table(load(args.out))))


def table(rows: list[dict], decimals: int | None = None) -> list[str]:
    """The markdown table the notes quote (and the docs' results pages, built by
    docs/hooks/results_tables.py): one row per env, flags and W over the runs in `rows`. A row
    of another benchmark's file may lack the sweep's seed, flags, lag, dropped, workers
    waited or commit: those cells read "-" (seeds are then left out). Scores are written
    as `_score` writes them, or with `decimals` decimals."""
    score = _scorer(decimals)
    lines = ["| env (flags) | W | 100-episode mean per seed | median | env steps | updates "
             "| lag p95 (max) | dropped | workers waited | wall s (median) | commit |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (env, w, flags), rs in _cells(rows):
        lag = "-"
        if all("policy_lag_p95" in r and "max_policy_lag" in r for r in rs):
            lag = f"{max(r['policy_lag_p95'] for r in rs)} ({max(r['max_policy_lag'] for r in rs)})"
        dropped = (str(sum(r["dropped_batches"] for r in rs))
                   if all("dropped_batches" in r for r in rs) else "-")
        waited = (f"{statistics.median(r['worker_wait_pct'] for r in rs):.0f}%"
                  if all("worker_wait_pct" in r for r in rs) else "-")
        updates = _span([r["updates"] for r in rs]) if all("updates" in r for r in rs) else "-"
        lines.append(
            f"| {_name(env, flags)} | {w} | {_per_seed(rs, score)} | "
            f"{score(statistics.median(r['mean_return_100'] for r in rs))} | "
            f"{_span([r['env_steps'] for r in rs])} | {updates} | {lag} | {dropped} | "
            f"{waited} | {statistics.median(r['wall_s'] for r in rs):.0f} | {_commits(rs)} |")
    return lines


def peer_table(rows: list[dict], decimals: int | None = None) -> list[str]:
    """Ours against a peer library on the same env: rows with `who` "dac" are ours (one
    table row per env, flags and W, as in `table`), any other `who` names a peer run
    (benchmarks/quality.py's records, say), matched by env. `decimals` as in `table`."""
    score = _scorer(decimals)
    ours = [r for r in rows if r["who"] == "dac"]
    peers: dict[str, dict[str, list[dict]]] = {}
    for r in rows:
        if r["who"] != "dac":
            peers.setdefault(r["env"], {}).setdefault(r["who"], []).append(r)
    lines = ["| env (flags) | W | ours: 100-episode mean per seed | median | env steps "
             "| wall s (median) | peer | peer: 100-episode mean per seed | median | env steps "
             "| wall s (median) | commit |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    cells = _cells(ours)
    envs = [env for (env, _, _), _ in cells]
    cells += [((env, "-", ()), []) for env in sorted(peers) if env not in envs]
    for (env, w, flags), rs in cells:
        for who, ps in sorted(peers.get(env, {"-": []}).items()):
            lines.append(f"| {_name(env, flags)} | {w} | {_runs(rs, score)} | {who} "
                         f"| {_runs(ps, score)} | {_commits(rs)} |")
    return lines


def _cells(rows: list[dict]) -> list[tuple[tuple, list[dict]]]:
    """Rows grouped by (env, W, flags), sorted by env, flags, W; each group by seed."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["env"], r["workers"], tuple(r.get("flags", ()))), []).append(r)
    for rs in cells.values():
        rs.sort(key=lambda r: r.get("seed", 0))
    return sorted(cells.items(), key=lambda c: (c[0][0], c[0][2], c[0][1]))


def _name(env: str, flags: tuple) -> str:
    """The env and its flags in parentheses (a note already in parentheses as it is)."""
    said = " ".join(flags)
    return env + (f" {said}" if said.startswith("(") and said.endswith(")")
                  else f" ({said})" if said else "")


def _runs(rs: list[dict], score) -> str:
    """Per seed | median | env steps | median wall s, as four cells ("-" without runs)."""
    if not rs:
        return "- | - | - | -"
    return (f"{_per_seed(rs, score)} | "
            f"{score(statistics.median(r['mean_return_100'] for r in rs))} | "
            f"{_span([r['env_steps'] for r in rs])} | "
            f"{statistics.median(r['wall_s'] for r in rs):.0f}")


def _per_seed(rs: list[dict], score) -> str:
    """Each run's score, then its seeds where every run has one."""
    scores = ", ".join(score(r["mean_return_100"]) for r in rs)
    if all("seed" in r for r in rs):
        scores += f" (seeds {', '.join(str(r['seed']) for r in rs)})"
    return scores


def _scorer(decimals: int | None):
    return _score if decimals is None else (lambda x: f"{x:.{decimals}f}")


def _commits(rs: list[dict]) -> str:
    return ", ".join(sorted({r["commit"] for r in rs if "commit" in r})) or "-"


def _score(x: float) -> str:
    """Whole numbers, but two decimals for returns under 10 (MiniGrid's 0.97, popgym's)."""
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.0f}"


def _span(values: list[int]) -> str:
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--envs", nargs="+", required=True)
    run.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    run.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    run.add_argument("flags", nargs="*", help="extra dac train flags, after --")
    table = sub.add_parser("table")
    for sp in (run, table):
        sp.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    cmd_run(args) if args.cmd == "run" else cmd_table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
