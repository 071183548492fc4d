"""What `dac bench` shows: a table, the pipeline efficiency, a PNG, and --compare.

All functions take the records bench/phases.py writes (one dict per JSON line), so a saved
.jsonl file can be re-reported or compared without re-measuring.
"""

from __future__ import annotations

from pathlib import Path

from distributed_ac.run.metrics import read_rows

# Rates drawn against workers; broadcast is a latency and stays in the table.
PLOTTED = ("env", "worker", "learner", "e2e_sync", "e2e_async")
KEY_FIELDS = ("phase", "env", "mode", "workers", "envs_per_worker", "rollout_length",
              "batch_size", "device")


def load_jsonl(path: str | Path) -> list[dict]:
    """Records from a JSON-lines file; lines that are not JSON objects are skipped."""
    return read_rows(path)


def key(rec: dict) -> tuple:
    """What makes two measurements comparable: phase, env and the configuration swept."""
    return tuple(rec.get(k) for k in KEY_FIELDS)


def describe(k: tuple) -> str:
    d = dict(zip(KEY_FIELDS, k))
    text = f"{d['phase']:<10} {d['env']} W={d['workers']} N={d['envs_per_worker']} T={d['rollout_length']}"
    if d["phase"] in ("learner", "e2e_sync", "e2e_async"):
        text += f" B={d['batch_size']}"
    if d["phase"] == "learner" and d["device"]:
        text += f" {d['device']}"
    return text


def compare(old: list[dict], new: list[dict]) -> list[dict]:
    """new/old ratio of the median for every measurement present in both (last one wins)."""
    old_by, new_by = {key(r): r for r in old}, {key(r): r for r in new}
    rows = []
    for k in new_by:
        if k in old_by and old_by[k]["value"]:
            rows.append({"what": describe(k), "unit": new_by[k]["unit"], "old": old_by[k]["value"],
                         "new": new_by[k]["value"], "ratio": new_by[k]["value"] / old_by[k]["value"]})
    return rows


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}"  # rates, or a ratio (efficiency)


def format_compare(rows: list[dict], only_old: int = 0, only_new: int = 0) -> str:
    lines = [f"{'measurement':<58} {'old':>12} {'new':>12} {'new/old':>8}"]
    for r in rows:
        flag = "  slower" if r["ratio"] < 0.9 else ("  faster" if r["ratio"] > 1.1 else "")
        lines.append(f"{r['what']:<58} {_num(r['old']):>12} {_num(r['new']):>12} {r['ratio']:>7.2f}x{flag}")
    if only_old or only_new:
        lines.append(f"({only_old} measurement(s) only in OLD, {only_new} only in NEW)")
    return "\n".join(lines)


def compare_files(old_path: str | Path, new_path: str | Path) -> str:
    old, new = load_jsonl(old_path), load_jsonl(new_path)
    rows = compare(old, new)
    both = {key(r) for r in old} & {key(r) for r in new}
    return format_compare(rows, len({key(r) for r in old} - both), len({key(r) for r in new} - both))


def _cells(records: list[dict]) -> tuple[list[tuple[int, int]], dict]:
    grid: dict = {}
    for r in records:
        grid[(r["workers"], r["envs_per_worker"], r["phase"])] = r
    combos = sorted({(w, n) for w, n, _ in grid})
    return combos, grid


def _find(records: list[dict], phase: str, workers: int, envs: int, batch_size=None):
    """The last record of `phase` for this cell (and this batch size, when given)."""
    found = [r for r in records if r["phase"] == phase and r["workers"] == workers
             and r["envs_per_worker"] == envs and batch_size in (None, r["batch_size"])]
    return found[-1] if found else None


def pipeline_efficiency(records: list[dict]) -> list[dict]:
    """One `efficiency` record per (workers, envs_per_worker) that has e2e_async, worker
    and learner: e2e_async env steps/s over the slowest stage, where the stages are the
    workers' env + policy (the `worker` phase at that W) and the learner (the `learner`
    phase at the batch size the e2e run trains on). 1.0 = training as fast as its
    slowest stage alone; what is missing is transport, the driver loop, and the stages
    sharing CPUs. `samples` holds each e2e run over the same slowest stage."""
    out = []
    for w, n in sorted({(r["workers"], r["envs_per_worker"]) for r in records}):
        e2e = _find(records, "e2e_async", w, n)
        worker = _find(records, "worker", w, n)
        learner = e2e and _find(records, "learner", w, n, e2e["batch_size"])
        if not (e2e and worker and learner) or min(worker["value"], learner["value"]) <= 0:
            continue
        stages = {"worker": worker["value"], "learner": learner["value"]}
        limited_by = min(stages, key=stages.get)
        slowest = stages[limited_by]
        out.append({**e2e, "phase": "efficiency", "unit": "e2e_async/slowest stage",
                    "value": round(e2e["value"] / slowest, 3),
                    "samples": [round(x / slowest, 3) for x in e2e["samples"]],
                    "extra": {"limited_by": limited_by, "e2e_steps_per_s": e2e["value"],
                              "worker_steps_per_s": worker["value"],
                              "learner_samples_per_s": learner["value"],
                              "learner_device": learner["device"],
                              "learner_tf_threads": learner["extra"].get("tf_threads")}})
    return out


def table(records: list[dict]) -> str:
    """One row per (workers, envs_per_worker), one column per phase, medians; the
    pipeline efficiency last, with the stage that limits it."""
    combos, grid = _cells(records)
    phases = [p for p in ("env", "worker", "learner", "broadcast", "e2e_sync", "e2e_async")
              if any(ph == p for _, _, ph in grid)]
    has_eff = any(ph == "efficiency" for _, _, ph in grid)
    head = f"{'workers':>7} {'envs/w':>7} " + " ".join(f"{p:>12}" for p in phases)
    lines = [head + (f" {'efficiency':>18}" if has_eff else "")]
    for w, n in combos:
        cells = []
        for p in phases:
            r = grid.get((w, n, p))
            cells.append(f"{'-':>12}" if r is None else
                         f"{r['extra']['ms']:>10.2f}ms" if p == "broadcast" else f"{r['value']:>12,.0f}")
        eff = grid.get((w, n, "efficiency"))
        if has_eff:
            cells.append(f"{'-':>18}" if eff is None else
                         f"{eff['value']:>6.2f} ({eff['extra']['limited_by']:>7})")
        lines.append(f"{w:>7} {n:>7} " + " ".join(cells))
    units = "env, worker, e2e: env steps/s; learner: samples/s; broadcast: ms per bundle to every worker"
    if has_eff:
        units += "\nefficiency: e2e_async / the slower stage alone (worker at that W, learner at its batch), and which"
    return "\n".join(lines + [units])


def plot(records: list[dict], path: str | Path) -> Path:
    """PNG: steps/s against workers, one line per phase, one panel per envs_per_worker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({r["envs_per_worker"] for r in records})
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4.2), squeeze=False)
    for ax, n in zip(axes[0], envs):
        for phase in PLOTTED:
            pts = sorted((r["workers"], r["value"]) for r in records
                         if r["phase"] == phase and r["envs_per_worker"] == n)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=phase)
        ax.set_yscale("log")
        ax.set_xticks(sorted({r["workers"] for r in records}))
        ax.set_xlabel("rollout workers")
        ax.set_ylabel("env steps/s (learner: samples/s)")
        ax.set_title(f"{records[0]['env']}, {n} envs/worker")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
