"""Atari env throughput: the two builds of make_vector_env for an ALE id, Gymnasium's
wrappers in a SyncVectorEnv (vectorization sync) and ale_py's AtariVectorEnv under
atari.AleGames (auto), with the same training preprocessing; one JSON line per variant.

    taskset -c 0 python benchmarks/atari_env.py --env ALE/Pong-v5 --envs 8 --repeats 5

Both run on one core (AtariVectorEnv with num_threads=1) with random actions. The
variants alternate window by window, so a neighbour's load on the core falls on both
alike. `steps_per_s` is agent steps per wall second; `steps_per_cpu_s` per second of
this process's CPU time (all its threads), which a busy shared core disturbs less;
frames are agent steps x 4 (the frame skip). `ale_vector` includes AleGames' work: the
transpose to channels last ([N, 4, 84, 84] -> [N, 84, 84, 4]), score keeping, clipping.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from distributed_ac.envs import atari
from distributed_ac.envs.vector import make_vector_env

FRAME_SKIP = atari.ALE_FRAME_SKIP


VARIANTS = {"gym_stack": "sync", "ale_vector": "auto"}  # name: vectorization


def window(venv, rng, n: int, min_time: float) -> tuple[float, float]:
    """(agent steps per wall s, per CPU s) of stepping for at least min_time seconds."""
    steps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < min_time:
        venv.step(rng.integers(0, venv.single_action_space.n, n))
        steps += n
    return steps / (time.perf_counter() - t0), steps / max(time.process_time() - c0, 1e-9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="ALE/Pong-v5")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=2.0)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    variants = {name: make_vector_env(args.env, args.envs, mode) for name, mode in VARIANTS.items()}
    rates: dict[str, list] = {name: [] for name in variants}
    for venv in variants.values():
        venv.reset(seed=0)
        window(venv, rng, args.envs, 0.2)  # warm-up
    for _ in range(args.repeats):
        for name, venv in variants.items():
            rates[name].append(window(venv, rng, args.envs, args.min_time))
    for name, r in rates.items():
        wall, cpu = [x[0] for x in r], [x[1] for x in r]
        print(json.dumps({
            "variant": name, "vectorization": VARIANTS[name], "env": args.env,
            "type": type(variants[name]).__name__, "num_envs": args.envs,
            "steps_per_s": round(statistics.median(wall), 1),
            "steps_per_cpu_s": round(statistics.median(cpu), 1),
            "frames_per_s": round(statistics.median(wall) * FRAME_SKIP, 1),
            "frames_per_cpu_s": round(statistics.median(cpu) * FRAME_SKIP, 1),
            "samples_wall": [round(x, 1) for x in wall], "samples_cpu": [round(x, 1) for x in cpu]}))


if __name__ == "__main__":
    main()
