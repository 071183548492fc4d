"""What `dac tune` leaves in its experiment directory, and the table it prints:

    results.jsonl / results.csv   one row per trial: its values, status, last metrics
    best.yaml                     the best trial's whole Config (dac train --config takes it)
    curves.png                    every trial's metric against env steps

Rows are read from Tune's results duck-typed (config, metrics, metrics_dataframe, error,
path), so this module needs no Ray.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from distributed_ac.config.schema import dump_yaml
from distributed_ac.tuning.search_space import TRAIN_METRIC
from distributed_ac.tuning.experiment_spec import TuneSpec

COUNTERS = ("env_steps", "updates", "training_iteration")


def trial_rows(results, spec: TuneSpec) -> list[dict]:
    """One plain row per trial, in Tune's order: trial id, status, the searched values,
    the metric's last value (and the training mean's), and the trial's counters."""
    rows = []
    for r in results:
        m = r.metrics or {}
        row = {"trial": m.get("trial_id") or Path(r.path).name,
               "status": "ERROR" if r.error else "OK",
               **{name: r.config.get(name) for name in spec.space},
               spec.metric: _number(m.get(spec.metric)),
               TRAIN_METRIC: _number(m.get(TRAIN_METRIC)),  # beside an evaluation metric
               **{k: m.get(k) for k in COUNTERS}}
        rows.append(row)
    return rows


def best_index(rows: list[dict], spec: TuneSpec) -> int | None:
    """The row with the best last metric, the first of equals (None when no trial
    reported it)."""
    sign = 1 if spec.mode == "max" else -1
    scored = [(sign * v, -i) for i, row in enumerate(rows) if (v := row[spec.metric]) is not None]
    return -max(scored)[1] if scored else None


def write_outputs(results, spec: TuneSpec, exp_dir: Path) -> dict:
    """Write every output file; return a summary (the best trial, its metric, the files)."""
    rows = trial_rows(results, spec)
    with open(exp_dir / "results.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    with open(exp_dir / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["trial"])
        writer.writeheader()
        writer.writerows(rows)
    best = best_index(rows, spec)
    out = {"experiment": str(exp_dir), "trials": len(rows), "metric": spec.metric,
           "best_trial": None, "best_value": None, "best_config": None}
    if best is not None:
        best_config = exp_dir / "best.yaml"
        dump_yaml(spec.trial_config({k: rows[best][k] for k in spec.space}), best_config)
        out.update(best_trial=rows[best]["trial"], best_value=rows[best][spec.metric],
                   best_config=str(best_config))
    plot_curves(results, rows, spec, exp_dir / "curves.png")
    return out


def table(rows: list[dict], spec: TuneSpec, best: int | None) -> str:
    """The results as an aligned text table, the best trial marked with *."""
    columns = list(rows[0]) if rows else ["trial"]
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    for i, r in enumerate(cells):
        mark = "* " if i == best else "  "
        lines.append(mark + "  ".join(v.ljust(w) for v, w in zip(r, widths)))
    return "\n".join(lines)


def plot_curves(results, rows: list[dict], spec: TuneSpec, out: Path) -> None:
    """Each trial's reported metric against env steps, on one figure."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    for r, row in zip(results, rows):
        frame = r.metrics_dataframe
        if frame is None or spec.metric not in frame or "env_steps" not in frame:
            continue
        ax.plot(frame["env_steps"], frame[spec.metric], marker=".", label=row["trial"])
    ax.set(xlabel="env steps", ylabel=spec.metric, title=f"{len(rows)} trials")
    ax.grid(alpha=0.3)
    if rows:
        ax.legend(fontsize="small")
    fig.savefig(out, dpi=100)


def _number(v):
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)
