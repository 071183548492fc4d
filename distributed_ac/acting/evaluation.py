"""Evaluation episodes: a policy plays whole episodes on one env of its own, no learning.

`dac evaluate` and evaluation during training both play through here, so a row that
training logs is what `dac evaluate` reports for the same weights and seeds. The env is
made with training=False: ALE episodes are whole games with raw (unclipped) rewards and
no per-life terminals, so returns are game scores; the observations are the training ones.

NumPy and Gymnasium only (no TensorFlow, no Ray): pool/ray_pool.py runs an Evaluator as
a Ray actor beside the rollout workers, pool/serial.py on a thread.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

import gymnasium as gym
import numpy as np

from distributed_ac.acting.policies import policy_for
from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Weights
from distributed_ac.core.errors import EnvError
from distributed_ac.envs.atari import Preprocess, make_single
from distributed_ac.envs.packages import import_packages
from distributed_ac.envs.multiagent import ACTIVE_KEY, ParallelVectorEnv
from distributed_ac.envs.games import check_greedy
from distributed_ac.envs.selfplay import Baseline, SelfPlayVectorEnv
from distributed_ac.envs.vector import (
    made,
    make_parallel_vector_env,
    resolve_env_id,
    space_for,
)

# (episode index, whether it has ended): what an evaluation loop tells a recorder after
# each reset (False) and step, so `dac evaluate --video` can draw the frames
# (trained/video.py) without standing between the loop and its env
Record = Callable[[int, bool], None]

SEED_OFFSET = 2**31  # training hands out seeds below this, so no training start repeats


def first_seed(cfg: Config) -> int:
    """The seed of evaluation episode 0 (episode i: + i), the same for every evaluation."""
    return SEED_OFFSET + cfg.seed


def make_eval_env(cfg: Config, render_mode: str | None = None) -> gym.Env:
    """One env as evaluation plays it: the training observations, whole games, raw rewards."""
    import_packages(cfg.gym_packages)  # `dac evaluate` may make it before any probe
    env_id = resolve_env_id(cfg.env)
    if render_mode is not None:
        # rgb_array frames need no display; without this SDL (pygame) looks for one and
        # complains on a headless machine.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    kwargs = {"render_mode": render_mode} if render_mode else {}
    parallel = make_parallel_vector_env(cfg.env, 1, cfg.agent_id, cfg.vectorization,
                                        Preprocess.of(cfg, training=False), cfg.self_play,
                                        **kwargs)
    if isinstance(parallel, SelfPlayVectorEnv):  # one game against the fixed player
        if cfg.eval_opponent == "greedy":
            check_greedy(parallel.single_observation_space["observation"].shape, cfg.env)
        parallel.opponents = Baseline(cfg.eval_opponent)
    if parallel is not None:  # a PettingZoo env: one copy, a row per agent (or a game)
        return parallel
    return made(cfg.env, lambda: make_single(env_id, Preprocess.of(cfg, training=False),
                                             **kwargs))


def play_episodes(env: gym.Env, policy: Policy, episodes: int, deterministic: bool, seed: int,
                  env_name: str, stop: threading.Event | None = None,
                  agent_returns: np.ndarray | None = None,
                  record: Record | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(undiscounted raw return, length) of each of `episodes` episodes, one after another;
    episode i is reset with seed `seed + i` and actions are sampled from a generator seeded
    with `seed`, so the same weights give the same numbers. `stop`, once set, ends the
    play at the next step (the numbers are then partial: a caller that sets it drops them).
    `agent_returns` [episodes, agents] (PettingZoo envs): filled with each agent's return,
    NaN for an agent that took no part. `record` (PettingZoo envs; a Gymnasium env is
    recorded by wrapping it): called after every reset and step (Record)."""
    if isinstance(env, SelfPlayVectorEnv):
        return play_games(env, policy, episodes, deterministic, seed, stop, record)
    if isinstance(env, ParallelVectorEnv):
        return play_agent_episodes(env, policy, episodes, deterministic, seed, env_name, stop,
                                   agent_returns, record)
    rng = np.random.default_rng(seed)
    returns, lengths = np.zeros(episodes), np.zeros(episodes, np.int64)
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        policy.reset_state(1)  # a recurrent policy carries its state through the episode
        done = False
        while not done:
            if stop is not None and stop.is_set():
                return returns, lengths
            x, legal = policy.space.as_batch(obs, 1), policy.space.action_masks(obs, 1)
            if legal is not None and len(policy.rows_without_choice(legal)):
                raise EnvError(f"env '{env_name}' allowed no action at step {lengths[i]} of "
                               f"evaluation episode {i} (its action_mask is all 0)")
            _, action, _ = policy.act(x, rng, deterministic, legal=legal)
            obs, reward, terminated, truncated, _ = env.step(action[0])
            returns[i] += float(reward)
            lengths[i] += 1
            done = terminated or truncated
    return returns, lengths


def play_games(env: SelfPlayVectorEnv, policy: Policy, episodes: int, deterministic: bool,
               seed: int, stop: threading.Event | None = None,
               record: Record | None = None) -> tuple[np.ndarray, np.ndarray]:
    """play_episodes on one copy of a self-play game against its fixed opponent: each
    game's return is the policy's seat's (+1 win, 0 draw, -1 loss in the classic
    games), its length the policy's moves."""
    rng = np.random.default_rng(seed)
    returns, lengths = np.zeros(episodes), np.zeros(episodes, np.int64)
    for i in range(episodes):
        obs, _ = env.reset(seed=[seed + i])
        done = False
        if record is not None:
            record(i, False)
        while not done:
            if stop is not None and stop.is_set():
                return returns, lengths
            x, legal = policy.space.as_batch(obs, 1), policy.space.action_masks(obs, 1)
            _, action, _ = policy.act(x, rng, deterministic, legal=legal)
            obs, reward, terminated, truncated, _ = env.step(action)
            returns[i] += float(reward[0])
            lengths[i] += 1
            done = bool(terminated[0] or truncated[0])
            if record is not None:
                record(i, done)
    return returns, lengths


def play_agent_episodes(env: ParallelVectorEnv, policy: Policy, episodes: int,
                        deterministic: bool, seed: int, env_name: str,
                        stop: threading.Event | None = None,
                        agent_returns: np.ndarray | None = None,
                        record: Record | None = None) -> tuple[np.ndarray, np.ndarray]:
    """play_episodes on one copy of a PettingZoo env, every agent a row acted for by the
    one policy: an episode's return is the mean of its agents' returns (each agent's
    sum of its own rewards: what training's per-agent episodes average to when every
    agent lives the whole episode; separate policies each act for their own agents), its length the number of steps until no agent is
    alive."""
    rng = np.random.default_rng(seed)
    returns, lengths = np.zeros(episodes), np.zeros(episodes, np.int64)
    n = env.num_envs
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i)
        alive, starts = info[ACTIVE_KEY], np.ones(n, bool)
        took_part, sums = alive.copy(), np.zeros(n)
        policy.reset_state(n)
        if record is not None:
            record(i, False)
        while alive.any():
            if stop is not None and stop.is_set():
                return returns, lengths
            x, legal = policy.space.as_batch(obs, n), policy.space.action_masks(obs, n)
            if legal is not None:
                legal[~alive] = True  # rows without an agent: their action is not used
                if len(policy.rows_without_choice(legal)):
                    raise EnvError(f"env '{env_name}' allowed no action at step {lengths[i]} "
                                   f"of evaluation episode {i} (its action_mask is all 0)")
            _, action, _ = policy.act(x, rng, deterministic, starts=starts, legal=legal)
            obs, reward, _, _, info = env.step(action)
            sums += np.where(alive, reward, 0.0)
            starts = info[ACTIVE_KEY] & ~alive
            alive = info[ACTIVE_KEY]
            took_part |= alive
            lengths[i] += 1
            if record is not None:
                record(i, not alive.any())
        returns[i] = sums[took_part].mean()
        if agent_returns is not None:
            agent_returns[i] = np.where(took_part, sums, np.nan)
    return returns, lengths


class Evaluator:
    """Plays evaluation episodes with whatever Weights bundle it is handed, on an env of
    its own (never a rollout worker's), so training's envs and seeds are left untouched."""

    def __init__(self, cfg: Config, limit_cpus: bool = False,
                 stop: threading.Event | None = None):
        """`stop`: set by an owner that drops the evaluation under way (serial mode's
        thread, at the end of a run); an actor process is simply killed instead."""
        if limit_cpus:  # a process of its own (Ray): one core's BLAS threads, as a worker
            from distributed_ac.acting.worker import limit_threads

            limit_threads(1)
        self.cfg, self.stop = cfg, stop
        self.policy = policy_for(cfg, space_for(cfg))
        self.env = make_eval_env(cfg)

    def evaluate(self, weights: Weights, episodes: int, deterministic: bool) -> dict:
        """Each episode's return and length, played from first_seed(cfg)."""
        self.policy.load(weights)
        returns, lengths = play_episodes(self.env, self.policy, episodes, deterministic,
                                         first_seed(self.cfg), self.cfg.env, self.stop)
        return {"returns": returns.tolist(), "lengths": lengths.tolist()}

    def close(self) -> None:
        self.env.close()
