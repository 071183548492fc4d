"""`dac plot`: learning curves from runs' metrics.jsonl, for one run or several compared.

Two panels share the return axis: return against env steps (sample efficiency) and
against wall-clock seconds (speed). Each point is one metrics row's mean episodic
return; rows in which no episode ended are skipped. Reads JSON only: no TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

from distributed_ac.core.errors import RunDirError
from distributed_ac.run.metrics import read_rows
from distributed_ac.run.rundir import open_run

RETURN = "charts/episodic_return"


def curve(run_dir: str | Path) -> tuple[list[int], list[float], list[float]]:
    """(env steps, wall seconds, return) of every row with a return."""
    run = open_run(run_dir, need_checkpoint=False)
    if not run.metrics.is_file():
        raise RunDirError(f"{run.path} has no metrics.jsonl yet")
    rows = [r for r in read_rows(run.metrics) if r.get(RETURN) is not None]
    if not rows:
        raise RunDirError(f"{run.path}: no episode has ended yet, so there is no return to plot")
    return [r["env_steps"] for r in rows], [r["wall_s"] for r in rows], [r[RETURN] for r in rows]


def plot(run_dirs: list[str | Path], out: str | Path) -> dict:
    """Draw every run's curves on one figure and save it (format from `out`'s suffix)."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    curves = {str(d): curve(d) for d in run_dirs}  # every run is checked before drawing
    fig = Figure(figsize=(12, 4.5), layout="constrained")
    by_steps, by_time = fig.subplots(1, 2, sharey=True)
    for label, (steps, wall, ret) in curves.items():
        style = {"label": label, "marker": "." if len(steps) < 100 else None}  # a short run shows
        by_steps.plot(steps, ret, **style)
        by_time.plot(wall, ret, **style)
    by_steps.set(xlabel="env steps", ylabel="episodic return", title="return vs env steps")
    by_time.set(xlabel="wall time (s)", title="return vs wall time")
    for ax in (by_steps, by_time):
        ax.grid(alpha=0.3)
    by_steps.legend(fontsize="small")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return {"out": str(out), "runs": list(curves), "points": {k: len(v[0]) for k, v in curves.items()}}
