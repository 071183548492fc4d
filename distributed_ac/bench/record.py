"""The facts every `dac bench` JSON line carries (CPUs, GPU, versions, commit) and the
line itself: `record` turns one measurement's timed windows into a JSON-ready dict.
No TensorFlow or Ray here, so benchmark scripts can import it cheaply."""

from __future__ import annotations

import datetime
import functools
import os
import platform
import shutil
import statistics
import subprocess
import time
from importlib import metadata

from distributed_ac.config.schema import Config
from distributed_ac.envs.atari import frame_skip

UNITS = {"env": "env_steps/s", "worker": "env_steps/s", "learner": "samples/s",
         "broadcast": "broadcasts/s", "e2e_sync": "env_steps/s", "e2e_async": "env_steps/s"}
STEP_PHASES = ("env", "worker", "learner", "e2e_sync", "e2e_async")  # rates of agent steps


# ---- facts about the machine ------------------------------------------------------
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpu_names() -> list[str]:
    """GPU names from nvidia-smi, without importing TensorFlow (empty when none)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=os.path.dirname(__file__))
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def process_age_s() -> float:
    """Seconds since this process started (Linux: /proc start time vs CLOCK_BOOTTIME)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in ticks
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started


@functools.lru_cache(maxsize=1)
def machine() -> dict:
    """The facts every JSON line carries: CPUs, GPU, versions, commit."""
    gpus = _gpu_names()
    return {"cpu_count": os.cpu_count(), "cpu_model": _cpu_model(),
            "gpu": gpus[0] if gpus else None, "gpu_count": len(gpus),
            "platform": platform.platform(), "python": platform.python_version(),
            "versions": {d: _version(d) for d in ("distributed_ac", "tensorflow", "ray",
                                                  "gymnasium", "numpy")},
            "commit": _git_commit()}


def record(phase: str, cfg: Config, workers: int, rates: list[float], batch_size: int,
           device: str | None = None, **extra) -> dict:
    """One measurement as a JSON-ready dict; `value` is the median of `samples`. A rate of
    agent steps (or samples, one agent step each) on an Atari env also gets
    `extra.frames_per_s`, the emulator frames those steps cost (x the frame skip)."""
    skip = frame_skip(cfg.env)
    if skip > 1 and phase in STEP_PHASES:
        extra = {**extra, "frames_per_s": round(statistics.median(rates) * skip, 1),
                 "frame_skip": skip}
    return {"phase": phase, "env": cfg.env, "mode": cfg.mode, "workers": workers,
            "envs_per_worker": cfg.envs_per_worker or cfg.num_envs,
            "rollout_length": cfg.rollout_length,
            "batch_size": batch_size, "hidden_sizes": list(cfg.hidden_sizes),
            "topology": cfg.topology, "device": device, "unit": UNITS[phase],
            "value": round(statistics.median(rates), 1), "samples": [round(r, 1) for r in rates],
            "repeats": len(rates), "extra": extra,
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine()}
