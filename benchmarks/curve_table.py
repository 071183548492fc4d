"""A long run's learning curve as the notes (docs/notes/) quote it: a CSV of every logged row and
the 100-episode mean at chosen env-step marks, from the run's metrics.jsonl.

    python benchmarks/curve_table.py RUN --csv benchmarks/results/pong-seed0.csv \
        --marks 250e3 500e3 1e6 2e6 3e6 4e6 5e6

The CSV has env_steps, wall_s, mean_return_100 and episodic_return (empty where the row
had none). Prints one JSON line per mark (the last row at or before it, so a mark past
the run's end reads the end), then one for the run: its last row and its best 100-episode
mean. Rows are as `dac train` wrote them, after every resume (a resume drops the rows past
its checkpoint, so there are no repeats).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from distributed_ac.run.metrics import read_rows

COLUMNS = ("env_steps", "wall_s", "charts/mean_return_100", "charts/episodic_return")


def write_csv(rows: list[dict], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow([c.split("/")[-1] for c in COLUMNS])
        for row in rows:
            out.writerow(["" if row.get(c) is None else row[c] for c in COLUMNS])


def at_mark(rows: list[dict], mark: float) -> dict | None:
    before = [r for r in rows if r["env_steps"] <= mark]
    if not before:
        return None
    r = before[-1]
    return {"mark": int(mark), "env_steps": r["env_steps"], "wall_s": r["wall_s"],
            "mean_return_100": r["charts/mean_return_100"]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a dac train run directory")
    p.add_argument("--csv", type=Path, help="where to write the rows as CSV")
    p.add_argument("--marks", type=float, nargs="*", default=[], help="env-step marks")
    args = p.parse_args(argv)
    rows = read_rows(args.run / "metrics.jsonl")
    if not rows:
        raise SystemExit(f"error: {args.run / 'metrics.jsonl'} has no rows")
    if args.csv:
        write_csv(rows, args.csv)
    for mark in args.marks:
        found = at_mark(rows, mark)
        if found:
            print(json.dumps(found))
    means = [(r["charts/mean_return_100"], r["env_steps"]) for r in rows
             if r["charts/mean_return_100"] is not None]
    best = max(means) if means else (None, None)
    last = rows[-1]
    print(json.dumps({"run": str(args.run), "env_steps": last["env_steps"],
                      "wall_s": last["wall_s"], "mean_return_100": last["charts/mean_return_100"],
                      "best_mean_return_100": best[0], "best_at": best[1],
                      "env_steps_per_s": round(last["env_steps"] / last["wall_s"], 1)}))


if __name__ == "__main__":
    main()
