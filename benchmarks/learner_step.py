"""The learner's step and weight export in a loop, one JSON line: milliseconds per update.

    python benchmarks/learner_step.py [--config FILE.yaml] [--windows 5] [--steps 200]

One TensorFlow thread, a real CartPole worker batch of the config (default: the package
base, 32 envs x 16 steps), 20 warm-up updates, then `--windows` timed windows of
`--steps` updates, each followed by `Learner.weights()` as the training loop does. For
before/after pairs, run it in fresh processes from each checkout in turn.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=None)
    p.add_argument("--windows", type=int, default=5)
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args(argv)
    from distributed_ac.acting.worker import RolloutWorker
    from distributed_ac.config.schema import Config, load_yaml
    from distributed_ac.learning.learner import Learner
    from distributed_ac.learning.tf_runtime import load_tensorflow
    from distributed_ac.training.startup import set_tf_threads

    set_tf_threads(load_tensorflow(), 1)
    cfg = load_yaml(args.config, Config(total_env_steps=10**9)) if args.config \
        else Config(total_env_steps=10**9)
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    batch = worker.collect(learner.weights())
    for _ in range(20):
        learner.step(batch)
        learner.weights()
    windows = []
    for _ in range(args.windows):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            learner.step(batch)
            learner.weights()
        windows.append((time.perf_counter() - t0) / args.steps * 1e3)
    print(json.dumps({"benchmark": "learner_step", "config": args.config,
                      "samples": batch.env_steps, "ms_per_update": round(statistics.median(windows), 3),
                      "windows_ms": [round(w, 3) for w in windows]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
