"""Soak: a long real `dac train` whose resident memory is sampled every 30 s.

    python benchmarks/notebook/worker-memory/soak.py [--minutes 20] [--every-s 30] [--warmup-s 120] [-- extra dac train flags]

One JSON line per sample: elapsed seconds, env steps so far, the resident MB of the
driver (which is also the learner: one process) and of each rollout worker. A last line
summarises growth from the first sample after warm-up to the end, per process kind (a
replaced worker starts a new series). The run is stopped with SIGTERM at the end, as a
user would, and must exit cleanly.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil


def parse() -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--every-s", type=float, default=30.0)
    p.add_argument("--warmup-s", type=float, default=120.0)
    p.add_argument("--env", default="CartPole-v1")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    return p.parse_args(argv[: argv.index("--")] if "--" in argv else argv), extra


def resident_mb(proc: psutil.Process) -> float | None:
    try:
        return proc.memory_info().rss / 2**20
    except psutil.Error:
        return None


def workers(root: psutil.Process) -> dict[int, psutil.Process]:
    out = {}
    for p in root.children(recursive=True):
        try:
            if "RolloutWorker" in " ".join(p.cmdline()):
                out[p.pid] = p
        except psutil.Error:
            pass
    return out


def env_steps(metrics: Path) -> int | None:
    try:
        last = metrics.read_text().strip().splitlines()[-1]
        return json.loads(last)["env_steps"]
    except (OSError, IndexError, ValueError, KeyError):
        return None


def growth(series: list[float]) -> float | None:
    return round(100.0 * (series[-1] - series[0]) / series[0], 2) if len(series) >= 2 else None


def main() -> None:
    a, extra = parse()
    run = Path(tempfile.mkdtemp(prefix="dac-soak-")) / "run"
    cmd = [sys.executable, "-m", "distributed_ac", "train", "--env", a.env,
           "--total-env-steps", str(10**12), "--run-dir", str(run), *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    start, series = time.monotonic(), {"driver": [], "workers": {}}
    try:
        while (t := time.monotonic() - start) < a.minutes * 60 and proc.poll() is None:
            sample = {"phase": "soak_sample", "t_s": round(t, 1), "env_steps": env_steps(run / "metrics.jsonl"),
                      "driver_learner_mb": resident_mb(root),
                      "workers_mb": {pid: resident_mb(p) for pid, p in workers(root).items()}}
            print(json.dumps(sample), flush=True)
            if t >= a.warmup_s:
                series["driver"].append(sample["driver_learner_mb"])
                for pid, mb in sample["workers_mb"].items():
                    if mb is not None:
                        series["workers"].setdefault(pid, []).append(mb)
            time.sleep(a.every_s)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    worker_growth = {pid: growth(s) for pid, s in series["workers"].items()}
    worst = max([g for g in [growth(series["driver"]), *worker_growth.values()] if g is not None],
                default=None)
    print(json.dumps({"phase": "soak_summary", "minutes": a.minutes, "warmup_s": a.warmup_s,
                      "driver_learner_growth_pct": growth(series["driver"]),
                      "worker_growth_pct": worker_growth, "worst_growth_pct": worst,
                      "under_5_pct": worst is not None and worst < 5.0,
                      "final_env_steps": env_steps(run / "metrics.jsonl"),
                      "exit_code": code, "run_dir": str(run)}), flush=True)


if __name__ == "__main__":
    main()
