"""Same training on 1 and then 2 nodes of a simulated Ray cluster; one JSON line each.

    python benchmarks/notebook/end-to-end-throughput/scaling.py [--envs-per-worker 256] [--rollout-length 32] [--updates 150]

The cluster is real Ray (ray.cluster_utils.Cluster: each node its own raylet), but all
nodes share this machine's cores, so the 2-node figure shows the distribution overhead
rather than a speed-up: on a 2-core machine the learner (in this driver) and two
one-CPU workers compete for two cores. It also measures what the scaling estimate in
docs/guide/clusters.md needs: the learner's samples/s on one batch, one worker's steps/s, and
the cost of broadcasting a weights bundle to every worker, and prints the estimate:

    workers one learner can feed  W* = S_learner / w_worker   (async: one batch per update)
    broadcast bound on updates/s  U* = 1 / b
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from distributed_ac.bench import phases  # noqa: E402
from distributed_ac.bench import record as bench_record  # noqa: E402
from distributed_ac.config.schema import Config  # noqa: E402
from distributed_ac.envs.vector import probe_space  # noqa: E402
from distributed_ac.pool import ray_pool  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--envs-per-worker", type=int, default=256)
    p.add_argument("--rollout-length", type=int, default=32)
    p.add_argument("--updates", type=int, default=150, help="updates per end-to-end run")
    p.add_argument("--repeats", type=int, default=3)
    return p.parse_args()


def emit(rec: dict) -> dict:
    print(json.dumps(rec), flush=True)
    return rec


def main() -> None:
    a = parse()
    cfg = Config(env=a.env, envs_per_worker=a.envs_per_worker, rollout_length=a.rollout_length,
                 mode="async", worker_cpus=1.0, total_env_steps=10**9)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        ray.init(address=cluster.address)
        one = emit({**phases.e2e_phase(cfg, 1, "async", a.repeats, a.updates), "nodes": 1})
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        two = emit({**phases.e2e_phase(cfg, 2, "async", a.repeats, a.updates), "nodes": 2})
        cast = emit({**phases.broadcast_phase(cfg, 2, a.repeats, 1.0), "nodes": 2})
    finally:
        ray_pool.shutdown()
        cluster.shutdown()
    space = probe_space(cfg.env)
    batch = cfg.rollout_length * cfg.envs_per_worker
    learn = emit(phases.learner_phase(cfg, space, batch, a.repeats, 1.0))
    worker = emit(phases.local_phase("worker", cfg, 1, a.repeats, 1.0))
    s, w, b = learn["value"], worker["value"], 1.0 / cast["value"]
    emit({"phase": "scaling_estimate", "env": cfg.env, "batch_size": batch,
          "learner_samples_per_s": s, "worker_steps_per_s": w, "broadcast_s": round(b, 5),
          "workers_one_learner_can_feed": round(s / w, 2),
          "broadcast_bound_updates_per_s": round(1.0 / b, 1),
          "e2e_steps_per_s": {"1_node": one["value"], "2_nodes": two["value"]},
          "machine": bench_record.machine()})


if __name__ == "__main__":
    main()
