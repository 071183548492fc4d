"""A rollout worker's collect() in a loop, one JSON line: env steps per second.

    python benchmarks/notebook/recurrent-cores/worker_step.py [--config FILE.yaml] [--windows 5] [--collects 600]

One BLAS thread, the config's worker (default: the package base on CartPole-v1, 32 envs
x 16 steps) acting with a synthetic weights bundle of its model (what `dac bench
--phases worker` loads), one warm-up collect, then `--windows` timed windows of
`--collects` collects. `best` is the fastest window: within one process the slower
windows are the machine's interruptions, not the code. For before/after pairs, run it
in fresh processes from each checkout in turn (PYTHONPATH pointing at the checkout) and
compare the pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy starts its BLAS pool, as a Ray worker does


def synthetic_weights(cfg, space):
    try:  # where the package keeps it now, or (older checkouts) in the bench phases
        from distributed_ac.bench.synthetic import random_weights
    except ImportError:
        from distributed_ac.bench.phases import random_weights
    return random_weights(cfg, space)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=None)
    p.add_argument("--windows", type=int, default=5)
    p.add_argument("--collects", type=int, default=600)
    args = p.parse_args(argv)
    from distributed_ac.acting.worker import RolloutWorker
    from distributed_ac.config.schema import Config, load_yaml

    cfg = load_yaml(args.config, Config()) if args.config else Config()
    worker = RolloutWorker(cfg, limit_cpus=False)
    weights = synthetic_weights(cfg, worker.space)
    worker.collect(weights)
    steps = worker.num_envs * cfg.rollout_length * args.collects
    rates = []
    for _ in range(args.windows):
        t0 = time.perf_counter()
        for _ in range(args.collects):
            worker.collect(weights)
        rates.append(steps / (time.perf_counter() - t0))
    print(json.dumps({"benchmark": "worker_step", "env": cfg.env, "config": args.config,
                      "envs": worker.num_envs, "rollout_length": cfg.rollout_length,
                      "best": round(max(rates)), "median": round(statistics.median(rates)),
                      "windows": [round(r) for r in rates]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
