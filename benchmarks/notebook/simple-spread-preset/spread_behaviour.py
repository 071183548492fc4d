"""What a trained simple_spread policy does: plays an exported policy (`dac export RUN
--out DIR`, greedy actions) on MPE's simple_spread (mpe2, 3 agents, discrete actions,
25 steps) and prints one JSON line: the mean episode return (one agent's, as `dac
train` logs it), how often each action is taken, how far the agents end from the
origin (the landmarks lie within 1 of it), and how many landmarks have an agent within
0.3 at the end.

    python benchmarks/notebook/simple-spread-preset/spread_behaviour.py DIR [--episodes 100] [--seed 1000]

A policy that drifts shows one action far above a fifth and agents ending several
units out; one that spreads covers landmarks and ends near them.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

ACTIONS = ("none", "left", "right", "down", "up")  # mpe2's discrete action order


def play(model, env, seed: int, counts: np.ndarray) -> tuple[float, float, int]:
    """One episode with the policy's actions; returns (one agent's return, the agents'
    mean distance from the origin at the end, landmarks with an agent within 0.3)."""
    obs, _ = env.reset(seed=seed)
    total = 0.0
    while env.agents:
        names = list(obs)
        actions = model.action({"agent_id": np.arange(len(names), dtype=np.int64),
                                "obs": np.stack([obs[a] for a in names]).astype(np.float32)
                                }).numpy()
        np.add.at(counts, actions, 1)
        obs, rewards, _, _, _ = env.step(dict(zip(names, actions.tolist())))
        total += float(np.mean(list(rewards.values())))
    world = env.unwrapped.world
    agents = np.array([a.state.p_pos for a in world.agents])
    landmarks = np.array([m.state.p_pos for m in world.landmarks])
    gaps = np.linalg.norm(agents[:, None] - landmarks[None], axis=-1)
    return total, float(np.linalg.norm(agents, axis=1).mean()), int((gaps.min(0) < 0.3).sum())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("saved_model")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=1000, help="the first episode's reset seed")
    args = p.parse_args()
    import tensorflow as tf
    from mpe2 import simple_spread_v3

    model = tf.saved_model.load(args.saved_model)
    env = simple_spread_v3.parallel_env(continuous_actions=False, max_cycles=25)
    counts = np.zeros(len(ACTIONS))
    runs = [play(model, env, args.seed + i, counts) for i in range(args.episodes)]
    returns, spread, covered = (np.array(x) for x in zip(*runs))
    print(json.dumps({"saved_model": args.saved_model, "episodes": args.episodes,
                      "mean_return": round(float(returns.mean()), 2),
                      "action_share": dict(zip(ACTIONS, (counts / counts.sum()).round(3).tolist())),
                      "distance_from_origin": round(float(spread.mean()), 2),
                      "landmarks_covered": round(float(covered.mean()), 2)}))


if __name__ == "__main__":
    main()
