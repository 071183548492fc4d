"""`dac evaluate`: run a trained policy on fresh seeds and report its returns. No Ray.

The policy is the one the workers act with (acting/policy.py's NumPy forward pass over the
Weights bundle of the newest checkpoint), so what is evaluated is what was trained.
Episode i is reset with seed `seed + i`; the default base, 2**31 + the training seed,
lies above every seed training hands out (all below 2**31), so no training episode's
start repeats here.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import gymnasium as gym
import numpy as np

from distributed_ac.acting.policy import Policy
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import EnvError, MissingDependency, UsageError
from distributed_ac.envs.atari import Preprocess, make_single
from distributed_ac.envs.vector import made, resolve_env_id, space_for
from distributed_ac.learning.tf_runtime import load_tensorflow
from distributed_ac.run.rundir import open_run, saved_config


def load_trained(run_dir: str | Path):
    """(Config, EnvSpace, Learner, checkpoint path): the newest checkpoint's networks, on the CPU."""
    run = open_run(run_dir)  # a bad path is reported before TensorFlow loads
    load_tensorflow()  # its C++ start-up lines held back (tf_runtime.py)
    from distributed_ac.learning.learner import Learner
    from distributed_ac.learning.networks import checkpoint_objects
    from distributed_ac.run.checkpoint import restore_networks

    # The run may have trained on a GPU this machine lacks; inference here is tiny.
    cfg = dataclasses.replace(saved_config(run), device="cpu")
    space = space_for(cfg)
    learner = Learner(cfg, space)
    path = restore_networks(run, checkpoint_objects(learner.nets))
    return cfg, space, learner, path


def _make_env(cfg: Config, video: Path | None) -> gym.Env:
    env_id = resolve_env_id(cfg.env)
    # rgb_array frames need no display; without this SDL (pygame) looks for one and
    # complains on a headless machine.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    # training=False: ALE episodes are whole games with raw (unclipped) rewards, so the
    # returns here are game scores; the observations are the training ones.
    env = made(cfg.env, lambda: make_single(env_id, Preprocess.of(cfg, training=False),
                                            render_mode="rgb_array" if video else None))
    if video is None:
        return env
    if env.render_mode != "rgb_array":
        env.close()
        raise UsageError(f"--video: '{cfg.env}' does not render rgb_array frames "
                         f"(its render modes: {env.metadata.get('render_modes', [])})")
    try:
        import moviepy  # noqa: F401  RecordVideo's encoder; an optional extra
    except ImportError:
        env.close()
        raise MissingDependency("--video needs moviepy: pip install 'distributed_ac[video]'") from None
    # Gymnasium's default schedule records episodes 0, 1, 8, 27, 64, 125, ... and every 1000th.
    return gym.wrappers.RecordVideo(env, str(video), name_prefix="eval", disable_logger=True)


def run_episodes(cfg: Config, policy: Policy, episodes: int, deterministic: bool, seed: int,
                 video: Path | None = None) -> np.ndarray:
    """Undiscounted raw return (Atari: game score) of each of `episodes` episodes, one env, seeds seed, seed + 1, ..."""
    env = _make_env(cfg, video)
    rng = np.random.default_rng(seed)
    returns = np.zeros(episodes)
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            policy.reset_state(1)  # a recurrent policy carries its state through the episode
            done, step = False, 0
            while not done:
                x, legal = policy.space.as_batch(obs, 1), policy.space.action_masks(obs, 1)
                if legal is not None and len(policy.rows_without_choice(legal)):
                    raise EnvError(f"env '{cfg.env}' allowed no action at step {step} of "
                                   f"evaluation episode {i} (its action_mask is all 0)")
                _, action, _ = policy.act(x, rng, deterministic, legal=legal)
                step += 1
                obs, reward, terminated, truncated, _ = env.step(action[0])
                returns[i] += float(reward)
                done = terminated or truncated
    finally:
        env.close()
    return returns


def evaluate(run_dir: str | Path, episodes: int = 100, deterministic: bool = False,
             video: Path | None = None, seed: int | None = None) -> dict:
    """Evaluate the newest checkpoint of a run; return the summary `dac evaluate` prints,
    with each episode's return in order (episode i ran on seed `seed` + i)."""
    if episodes < 1:
        raise UsageError("--episodes must be >= 1")
    cfg, space, learner, path = load_trained(run_dir)  # checks the path, then loads TF
    from distributed_ac.run.checkpoint import read_counters

    policy = Policy(space, learner.spec)
    policy.load(learner.weights())
    base = 2**31 + cfg.seed if seed is None else seed
    returns = run_episodes(cfg, policy, episodes, deterministic, base, video)
    return {"checkpoint": path, "env": cfg.env, "env_steps_trained": read_counters(path)["env_steps"],
            "episodes": episodes, "deterministic": deterministic, "seed": base,
            "mean": float(returns.mean()), "std": float(returns.std()),
            "min": float(returns.min()), "max": float(returns.max()), "returns": returns.tolist()}
