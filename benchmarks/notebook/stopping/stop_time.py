"""Time to stop: seconds from SIGTERM to the exit of a `dac train`, and what was left;
one JSON line per case and repeat.

    python benchmarks/notebook/stopping/stop_time.py                 # every case, 3 repeats each
    python benchmarks/notebook/stopping/stop_time.py --repeats 1 --cases ray-hung-async

Cases (CartPole-v1 unless named; 1 worker, 2 sub-envs, small network):
    serial, ray              SIGTERM once metrics rows are written
    serial-hung, ray-hung,   tests/fakes.py BlocksAfter: an env step that blocks for ten
    ray-hung-async           minutes (in the driver, the rollout worker, a sub-env process);
                             SIGTERM once it blocks
    ray-raylet-killed        the local raylet SIGKILLed, then SIGTERM

Each line: case, stop_s, the exit code, and `left`, the processes under the run that were
still alive 5 s after it exited (0 is the goal). stop_timeout_s is the default's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[3]  # benchmarks/notebook/NOTE/
SMALL = ["--num-workers", "1", "--envs-per-worker", "2", "--rollout-length", "8",
         "--hidden-sizes", "16", "--total-env-steps", "100000000", "--log-every-s", "0.2"]
CASES = {"serial": ["--serial"], "ray": [],
         "serial-hung": ["--serial", "--env", "fakes:BlocksAfter"],
         "ray-hung": ["--env", "fakes:BlocksAfter"],
         "ray-hung-async": ["--env", "fakes:BlocksAfter", "--vectorization", "async"],
         "ray-raylet-killed": []}


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"stop_time: the run ended or never got there ({path})")
        time.sleep(0.1)


def alive(procs: list) -> list:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def one(case: str, tmp: Path) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix=f"{case}-", dir=tmp))
    mark = run_dir / "blocked"
    env = {**os.environ, "DAC_TEST_BLOCK_MARK": str(mark),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "distributed_ac", "train", "--run-dir",
                             str(run_dir / "run"), *SMALL, *CASES[case]], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(mark if "hung" in case else run_dir / "run" / "metrics.jsonl", proc)
    under = psutil.Process(proc.pid).children(recursive=True)
    if case == "ray-raylet-killed":
        for p in under:
            if "raylet" in " ".join(p.cmdline()):
                p.kill()
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        code = None
    stop_s = time.monotonic() - start
    time.sleep(5)
    left = alive(under) + ([psutil.Process(proc.pid)] if code is None else [])
    for p in left:
        p.kill()
    return {"case": case, "stop_s": round(stop_s, 2), "exit_code": code, "left": len(left)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for case in args.cases:
                print(json.dumps(one(case, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
