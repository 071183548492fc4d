"""The best expected return of Gymnasium's tabular toy-text envs, by value iteration on
their own transition tables (env.unwrapped.P), averaged over their start states: the
reference a learned policy's 100-episode mean is read against.

    python benchmarks/notebook/suites/toy_text_optimum.py Taxi-v4 CliffWalking-v1 FrozenLake-v1 FrozenLake8x8-v1

Undiscounted, as the 100-episode mean counts returns. `optimum_mean_return` leaves the
time limit out, which Taxi's and CliffWalking's optima never meet (Taxi's best episodes
take at most ~20 of its 200 steps); `within_time_limit` is the best return within the
env's max_episode_steps (backward induction over the steps left), which a slippery
FrozenLake's optimum does meet. Prints one JSON line per env.
"""

from __future__ import annotations

import json
import sys

import gymnasium as gym
import numpy as np


def optimum(env_id: str, sweeps: int = 10_000, tol: float = 1e-9) -> dict:
    env = gym.make(env_id).unwrapped
    n_states, n_actions = env.observation_space.n, env.action_space.n
    values = np.zeros(n_states)
    for sweep in range(sweeps):
        q = np.array([[sum(p * (r + (0.0 if done else values[s2]))
                           for p, s2, r, done in env.P[s][a]) for a in range(n_actions)]
                      for s in range(n_states)])
        new = q.max(axis=1)
        if np.max(np.abs(new - values)) < tol:
            break
        values = new
    start = np.asarray(env.initial_state_distrib, float)
    return {"env": env_id, "optimum_mean_return": round(float(start @ values), 4),
            "within_time_limit": _limited(env, gym.spec(env_id), start),
            "sweeps": sweep + 1, "start_states": int((start > 0).sum())}


def _limited(env, spec, start) -> float | None:
    """The best expected return within the time limit (None: the env has none)."""
    if not spec.max_episode_steps:
        return None
    return round(float(start @ _within(env, spec)), 4)


def _within(env, spec) -> np.ndarray:
    """Each start state's best expected return with the time limit's steps left."""
    n_states, n_actions = env.observation_space.n, env.action_space.n
    values = np.zeros(n_states)  # no steps left: nothing more to gain
    for _ in range(spec.max_episode_steps):
        values = np.array([max(sum(p * (r + (0.0 if done else values[s2]))
                                   for p, s2, r, done in env.P[s][a])
                               for a in range(n_actions)) for s in range(n_states)])
    return values


if __name__ == "__main__":
    for env_id in sys.argv[1:] or ["Taxi-v4", "CliffWalking-v1", "FrozenLake-v1"]:
        print(json.dumps(optimum(env_id)))
