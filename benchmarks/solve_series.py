"""A series of solve_time.py runs, each in a fresh process, and their medians.

Time from process start includes every import and Ray's start, so each run needs its own
process. With several configs the runs interleave (A, B, A, B, ...), so a slow spell of
a shared machine lands on both; compare the medians of one series, not across series.

    python benchmarks/solve_series.py --config benchmarks/cartpole_fast.yaml --seeds 0 1 2 3 4 --rounds 2
    python benchmarks/solve_series.py --config old.yaml --config new.yaml --out ab.jsonl

Prints each run's JSON line (also appended to --out), then one summary line per config:
median, min and max of wall_s and first_update_s, solved runs, median env steps. Flags
after `--` go to every run (`dac train` flags, e.g. `-- --serial`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(config: str, seed: int, extra: list[str]) -> dict:
    cmd = [sys.executable, os.path.join(HERE, "solve_time.py"), "--config", config,
           "--seed", str(seed), *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
    if not lines:  # a failed run is reported, not dropped
        return {"benchmark": "solve_time", "config_file": config, "seed": seed, "solved": False,
                "error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    return {**json.loads(lines[-1]), "config_file": config}


def summarise(config: str, runs: list[dict]) -> dict:
    ok = [r for r in runs if "wall_s" in r]

    def stats(key, pick):
        xs = [pick(r) for r in ok]
        return {f"median_{key}": statistics.median(xs), f"min_{key}": min(xs),
                f"max_{key}": max(xs)} if xs else {}

    return {"benchmark": "solve_series", "config_file": config, "runs": len(runs),
            "solved": sum(bool(r.get("solved")) for r in runs),
            **stats("wall_s", lambda r: r["wall_s"]),
            **stats("first_update_s", lambda r: r["phases"]["first_update_s"]),
            "median_env_steps": statistics.median([r["env_steps"] for r in ok]) if ok else None}


def main(argv: list[str]) -> int:
    own, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", action="append", help="YAML config (repeat to interleave)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--out", help="append every JSON line here too")
    a = p.parse_args(own)
    configs = a.config or [os.path.join(HERE, "cartpole_fast.yaml")]
    runs: dict[str, list[dict]] = {c: [] for c in configs}
    lines = []
    for _ in range(a.rounds):
        for seed in a.seeds:
            for c in configs:
                r = run_once(c, seed, extra)
                runs[c].append(r)
                lines.append(json.dumps(r))
                print(lines[-1], flush=True)
    for c in configs:
        lines.append(json.dumps(summarise(c, runs[c])))
        print(lines[-1], flush=True)
    if a.out:
        with open(a.out, "a") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if all(r.get("solved") for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
