"""Seconds per learner update of presets/default.yaml on CartPoleNoVel, feed-forward or
with a recurrent core, whole rollouts or bptt_length chunks: one JSON line per run.

    python benchmarks/notebook/recurrent-speed/learner_update.py none 0
    python benchmarks/notebook/recurrent-speed/learner_update.py lstm 0      # whole 256-step rollouts
    python benchmarks/notebook/recurrent-speed/learner_update.py lstm 16     # chunks of 16 steps
    python benchmarks/notebook/recurrent-speed/learner_update.py lstm 16 64  # ... an LSTM of 64 units
    python benchmarks/notebook/recurrent-speed/learner_update.py lstm 16 --recurrent-minibatch-size 64 \
        --inter-op-threads 1                                 # the minibatches and threads before
    python benchmarks/notebook/recurrent-speed/learner_update.py none 0 --env \
        distributed_ac.envs.choices:ImageVectorMultiChoice   # another env, its own batch

One TensorFlow thread an op, inter-op threads as `dac train` gives a one-thread learner
(config/plan.py learner_inter_op_threads) unless --inter-op-threads says, one real worker
batch (8 envs x 256 steps, 10 epochs of minibatches: 64 samples, 256 with a core), 2
warm-up updates, then the median of 3 timed ones. For before/after
pairs, run it in fresh processes from each checkout in turn.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

NOVEL = "distributed_ac.envs.memory:CartPoleNoVel"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("core")
    p.add_argument("bptt", type=int)
    p.add_argument("core_size", type=int, nargs="?", default=0)  # 0: the config's auto size
    p.add_argument("--env", default=NOVEL)
    p.add_argument("--topology", default=None)  # default: the preset's
    p.add_argument("--recurrent-minibatch-size", type=int, default=None)  # default: the preset's
    p.add_argument("--inter-op-threads", type=int, default=0)  # 0: as dac train picks
    args = p.parse_args(argv)
    core, bptt, core_size = args.core, args.bptt, args.core_size
    from distributed_ac.acting.worker import RolloutWorker
    from distributed_ac.config import presets
    from distributed_ac.config.schema import Config, load_yaml, minibatch_samples
    from distributed_ac.training.startup import learner_tensorflow

    cfg = load_yaml(presets.DIR / "default.yaml", Config(env=args.env, total_env_steps=10**9))
    cfg = dataclasses.replace(cfg, core=core, bptt_length=bptt, core_size=core_size,
                              **({"topology": args.topology} if args.topology else {}))
    if args.recurrent_minibatch_size is not None:
        cfg = dataclasses.replace(cfg, recurrent_minibatch_size=args.recurrent_minibatch_size)
    worker = RolloutWorker(cfg, limit_cpus=False)
    tf = learner_tensorflow(cfg, worker.space, 1, args.inter_op_threads or None)
    inter = tf.config.threading.get_inter_op_parallelism_threads()
    from distributed_ac.learning.learner import Learner

    learner = Learner(cfg, worker.space)
    batch = worker.collect(learner.weights())
    for _ in range(2):
        learner.step(batch)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        learner.step(batch)
        learner.weights()
        times.append(time.perf_counter() - t0)
    s = statistics.median(times)
    print(json.dumps({"benchmark": "recurrent_learner_update", "env": args.env, "topology": cfg.topology, "core": core, "bptt_length": bptt,
                      "core_size": core_size or "auto",
                      "minibatch": minibatch_samples(cfg), "inter_op_threads": inter,
                      "samples": batch.env_steps, "s_per_update": round(s, 3),
                      "samples_per_s": round(batch.env_steps / s), "updates_s": [round(t, 3) for t in times]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
