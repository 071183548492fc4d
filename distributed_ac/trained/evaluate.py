"""Evaluation (`dac evaluate`, the API's evaluate): run a trained policy on fresh seeds
and report its returns. No Ray.

The policy is the one the workers act with (acting/numpy_policy.py's NumPy forward pass over the
Weights bundle of the newest checkpoint, or with --best of the best evaluation during
training), so what is evaluated is what was trained. Episodes are played by
acting/evaluation.py, as evaluation during training plays them.
Episode i is reset with seed `seed + i`; the default base, 2**31 + the training seed,
lies above every seed training hands out (all below 2**31), so no training episode's
start repeats here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from distributed_ac.acting.evaluation import first_seed, make_eval_env, play_episodes
from distributed_ac.acting.policies import policy_for
from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import UsageError
from distributed_ac.core.policies import groups_for
from distributed_ac.run.rundir import open_run
from distributed_ac.trained.load import load_trained
from distributed_ac.trained.video import recording_env
from distributed_ac.training.evaluation import game_rates


def _make_env(cfg: Config, video: Path | None):
    """The env the episodes are played on, and the recorder a PettingZoo env's episodes
    are handed to (trained/video.py; None: nothing to record, or a RecordVideo env)."""
    return (make_eval_env(cfg), None) if video is None else recording_env(cfg, video)


def run_episodes(cfg: Config, policy: Policy, episodes: int, deterministic: bool, seed: int,
                 video: Path | None = None, agent_returns: np.ndarray | None = None
                 ) -> np.ndarray:
    """Undiscounted raw return (Atari: game score) of each of `episodes` episodes, one env, seeds seed, seed + 1, ..."""
    env, record = _make_env(cfg, video)
    try:
        return play_episodes(env, policy, episodes, deterministic, seed, cfg.env,
                             agent_returns=agent_returns, record=record)[0]
    finally:
        env.close()


def evaluate(run_dir: str | Path, episodes: int = 100, deterministic: bool = False,
             video: Path | None = None, seed: int | None = None, best: bool = False,
             opponent: str | None = None, checkpoint: int | None = None) -> dict:
    """Evaluate the newest checkpoint of a run (with `best`: the best evaluation's during
    training); return the summary `dac evaluate` prints, with each episode's return in
    order (episode i ran on seed `seed` + i). A self-play run's games are played against
    `opponent` (default its eval_opponent), and the summary has their win rates."""
    if episodes < 1:
        raise UsageError("--episodes must be >= 1")
    cfg, space, nets, path = load_trained(run_dir, best, checkpoint)  # checks the path, then TF
    if opponent is not None:
        if not cfg.self_play:
            raise UsageError("--opponent: this run did not train by self-play")
        cfg = dataclasses.replace(cfg, eval_opponent=opponent)
    from distributed_ac.run.checkpoint import read_counters

    if best:
        record = open_run(run_dir, need_checkpoint=False).read_best() or {}
        trained = record.get("env_steps")
    else:
        trained = read_counters(path)["env_steps"]
    policy = policy_for(cfg, space, nets.spec)
    policy.load(nets.weights())
    base = first_seed(cfg) if seed is None else seed
    per_agent = np.full((episodes, space.agents), np.nan) if space.agents > 1 else None
    returns = run_episodes(cfg, policy, episodes, deterministic, base, video, per_agent)
    return {"checkpoint": path, "env": cfg.env, "env_steps_trained": trained,
            "episodes": episodes, "deterministic": deterministic, "seed": base,
            "mean": float(returns.mean()), "std": float(returns.std()),
            "min": float(returns.min()), "max": float(returns.max()),
            **_per_policy(cfg, space, per_agent),
            **({"opponent": cfg.eval_opponent, **game_rates(returns)} if cfg.self_play else {}),
            "returns": returns.tolist()}


def _per_policy(cfg: Config, space, agent_returns: np.ndarray | None) -> dict:
    """A PettingZoo env's mean return per agent, and with separate policies per policy
    (over the episodes its agents took part in); {} for a Gymnasium env."""
    if agent_returns is None:
        return {}
    names = space.agent_names
    out = {"agent_means": {a: _nanmean(agent_returns[:, j]) for j, a in enumerate(names)}}
    groups = groups_for(names, cfg.policy_mapping, cfg.env)
    if groups is not None:
        out["policy_means"] = {p: _nanmean(agent_returns[:, list(idx)])
                               for p, idx in groups.members.items()}
    return out


def _nanmean(a: np.ndarray) -> float | None:
    return float(np.nanmean(a)) if np.isfinite(a).any() else None

