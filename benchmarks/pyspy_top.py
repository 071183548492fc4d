"""Summarise a py-spy profile: inclusive seconds per function, busiest first; one JSON line.

Record with py-spy's raw (collapsed-stack) format, then summarise, e.g. the driver loop:

    py-spy record -r 250 --idle -f raw -o driver.txt -- \\
        python benchmarks/solve_time.py --config benchmarks/cartpole_fast.yaml
    python benchmarks/pyspy_top.py driver.txt --rate 250 --within Trainer.loop

`--within NAME` keeps only the samples whose stack passes through a function named NAME
(the phase under study); `--process TEXT` only those of processes whose command line
contains TEXT (with `py-spy record --subprocesses`). Seconds are samples / rate, so with
--idle they are wall time spent in (or waiting under) each function.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys

PROCESS = re.compile(r'process (\d+):"([^"]*)"')


def frame_name(frame: str) -> str:
    """'func (path/to/file.py:12)' -> 'func (file.py)'; a line number would split a function."""
    name, _, where = frame.partition(" (")
    path = where.split(":")[0]
    return f"{name} ({path.rsplit('/', 1)[-1] or '?'})"


def summarise(lines, rate: float, within: str | None, process: str | None, top: int) -> dict:
    inclusive: collections.Counter = collections.Counter()
    per_process: collections.Counter = collections.Counter()
    total = 0
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        procs = PROCESS.findall(stack)
        cmd = procs[-1][1] if procs else ""
        if process and process not in cmd:
            continue
        frames = [f for f in stack.split(";") if not PROCESS.match(f)]
        names = [frame_name(f) for f in frames]
        if within and not any(n.startswith(within + " ") for n in names):
            continue
        n = int(count)
        total += n
        per_process[cmd[:100]] += n
        for name in set(names):  # inclusive: once per sample however deep the recursion
            inclusive[name] += n
    return {"seconds": round(total / rate, 3), "within": within, "process": process,
            "processes": {k: round(v / rate, 3) for k, v in per_process.most_common(10)},
            "top": [[round(v / rate, 3), k] for k, v in inclusive.most_common(top)]}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("profile", help="py-spy raw output (record -f raw)")
    p.add_argument("--rate", type=float, default=100.0, help="py-spy's -r (samples/s)")
    p.add_argument("--within", help="only stacks through this function name")
    p.add_argument("--process", help="only processes whose command line contains this")
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args(argv)
    try:
        with open(args.profile) as f:
            out = summarise(f, args.rate, args.within, args.process, args.top)
    except OSError as e:
        print(f"pyspy_top: cannot read {args.profile}: {e.strerror}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
