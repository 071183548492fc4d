#!/usr/bin/env python3
"""Peer benchmark: Stable-Baselines3 PPO with the rl-baselines3-zoo tuned hyperparameters.

    python benchmarks/peers/sb3_ppo.py --env LunarLander-v3 --steps 1000000 --seed 0 \
        --out results.jsonl [--torch-threads 1] [--curve curve.csv]

Runs in its own virtual environment (benchmarks/peers/README.md): torch is not a
dependency of distributed_ac.

What it reports, measured the way `dac train` reports its own runs:
  mean_return_100  mean of the RAW returns (undiscounted, unnormalised env reward, as the
                   Monitor wrapper records them, below any VecNormalize) of the last 100
                   episodes finished within the budget, at the end of the budget (not the
                   peak); over fewer episodes if fewer finished, null if none did.
  env_steps        training stops at the first vector step that reaches --steps, so
                   env_steps = --steps rounded up to a multiple of n_envs; the partial
                   rollout collected last is not trained on.
  wall_s           seconds from after the imports to the end of training: env and model
                   construction plus model.learn (setup_s and learn_s split it);
                   steps_per_s = env_steps / wall_s.
"""
from __future__ import annotations

import argparse
import sys

# The zoo's settings per env, and how the zoo applies them: zoo_settings.py (a sibling
# module: the script runs with its own folder on the path, in its own virtual environment).
from zoo_settings import ZOO_PPO, ZOO_SOURCE

PEER = "sb3-ppo"

CURVE_EVERY = 10_000  # env steps between learning-curve rows


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        print(f"sb3_ppo.py: error: {message}", file=sys.stderr)
        sys.exit(2)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = _Parser(description="SB3 PPO peer benchmark (rl-zoo tuned hyperparameters).")
    p.add_argument("--env", required=True, help="one of: " + ", ".join(ZOO_PPO))
    p.add_argument("--steps", type=int, required=True, help="env-step budget")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="JSONL file; one line is appended")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch.set_num_threads (default 1: the machine has 2 cores)")
    p.add_argument("--stop-at-return", type=float, default=None,
                   help="also stop once the 100-episode mean reaches this (time to solve)")
    p.add_argument("--curve", default=None,
                   help=f"CSV of env_steps,wall_s,mean_return_100 every ~{CURVE_EVERY} steps")
    a = p.parse_args(argv)
    if a.env not in ZOO_PPO:
        p.error(f"unknown env {a.env!r}; known: {', '.join(ZOO_PPO)}")
    if a.steps <= 0:
        p.error(f"--steps must be positive, got {a.steps}")
    if a.torch_threads <= 0:
        p.error(f"--torch-threads must be positive, got {a.torch_threads}")
    return a


def _schedule(value):
    """A zoo schedule value: 'lin_X' -> X * progress_remaining; a number -> itself."""
    if isinstance(value, str):
        if not value.startswith("lin_"):
            raise ValueError(f"unsupported schedule {value!r}")
        initial = float(value[len("lin_"):])
        return lambda progress_remaining: progress_remaining * initial
    return value


def build(env_id: str, seed: int):
    """The zoo's env stack and PPO model for env_id, as rl_zoo3's ExperimentManager makes them."""
    import torch.nn as nn
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    hp = dict(ZOO_PPO[env_id])
    for k in ("zoo_key", "n_timesteps"):
        hp.pop(k)
    algo = hp.pop("algo", "PPO")
    if algo == "RecurrentPPO":
        from sb3_contrib import RecurrentPPO as PPO
    elif algo == "MaskablePPO":
        from sb3_contrib import MaskablePPO as PPO
    n_envs = hp.pop("n_envs", 1)
    normalize = hp.pop("normalize", False)
    policy = hp.pop("policy")
    for k in ("learning_rate", "clip_range"):
        if k in hp:
            hp[k] = _schedule(hp[k])
    if "policy_kwargs" in hp:
        pk = dict(hp["policy_kwargs"])
        if "activation_fn" in pk:
            pk["activation_fn"] = getattr(nn, pk["activation_fn"].removeprefix("nn."))
        hp["policy_kwargs"] = pk

    make = {"CartPoleNoVel-v1": no_velocity_cartpole,
            "MaskedChoice": masked_choice}.get(env_id, env_id)
    env = make_vec_env(make, n_envs=n_envs, seed=seed, vec_env_cls=DummyVecEnv)
    if normalize:
        nkw = {} if normalize is True else dict(normalize)
        if "gamma" in hp:
            nkw["gamma"] = hp["gamma"]
        env = VecNormalize(env, **nkw)
    model = PPO(policy, env, seed=seed, device="cpu", verbose=0, **hp)
    return model, env


def no_velocity_cartpole():
    """rl_zoo3's MaskVelocityWrapper on CartPole-v1: observations times [1, 0, 1, 0]."""
    import gymnasium as gym
    import numpy as np

    mask = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
    return gym.wrappers.TransformObservation(gym.make("CartPole-v1"), lambda o: o * mask,
                                             gym.make("CartPole-v1").observation_space)


def masked_choice():
    """distributed_ac's MaskedChoice as MaskablePPO takes it: the Dict's "obs" as the
    observation and its "action_mask" through sb3-contrib's ActionMasker."""
    import gymnasium as gym
    from sb3_contrib.common.wrappers import ActionMasker

    from distributed_ac.envs.choices import MaskedChoice

    class ObsOnly(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = env.observation_space["obs"]

        def observation(self, observation):
            self.mask = observation["action_mask"].astype(bool)
            return observation["obs"]

    return ActionMasker(ObsOnly(MaskedChoice()), lambda env: env.mask)


def process_age_s() -> float:
    """Seconds since the kernel started this process (Linux), imports included."""
    import os

    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


class CurveCsv:
    """The learning curve, env_steps,wall_s,mean_return_100: a row once the env steps pass
    each multiple of CURVE_EVERY, and one at the end of the budget."""

    def __init__(self, path: str, t0: float):
        self.t0 = t0
        self.next_row = CURVE_EVERY
        self.last_row = -1  # env_steps of the last row written
        self._file = open(path, "w")
        self._file.write("env_steps,wall_s,mean_return_100\n")

    def row(self, env_steps: int, mean_return: float) -> None:
        import time

        self.last_row = env_steps
        self._file.write(f"{env_steps},{time.perf_counter() - self.t0:.3f},{mean_return:.4f}\n")
        self._file.flush()
        while self.next_row <= env_steps:
            self.next_row += CURVE_EVERY

    def close(self, env_steps: int, mean_return: float) -> None:
        if self.last_row != env_steps:  # the end of the budget, once
            self.row(env_steps, mean_return)
        self._file.close()


def make_callback(budget: int, t0: float, curve_path: str | None, target: float | None = None):
    import collections

    import numpy as np
    from stable_baselines3.common.callbacks import BaseCallback

    class Recorder(BaseCallback):
        """Raw episode returns from the Monitor infos; stops at the budget; writes the curve."""

        def __init__(self):
            super().__init__()
            self.returns: collections.deque = collections.deque(maxlen=100)
            self.episodes = 0
            self.solved_at: tuple[int, float] | None = None  # (env steps, process age s)
            self._curve = CurveCsv(curve_path, t0) if curve_path else None

        def mean_return(self) -> float:
            return float(np.mean(self.returns)) if self.returns else float("nan")

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                ep = info.get("episode")
                if ep is not None:  # Monitor: raw return, whatever VecNormalize does above it
                    self.returns.append(float(ep["r"]))
                    self.episodes += 1
            if self._curve is not None and self.num_timesteps >= self._curve.next_row:
                self._curve.row(self.num_timesteps, self.mean_return())
            if (target is not None and len(self.returns) == self.returns.maxlen
                    and self.mean_return() >= target):
                self.solved_at = (self.num_timesteps, process_age_s())
                return False
            return self.num_timesteps < budget

        def close(self) -> None:
            if self._curve is not None:
                self._curve.close(self.num_timesteps, self.mean_return())
                self._curve = None

    return Recorder()


def _versions() -> dict:
    import platform
    from importlib import metadata

    out = {"python": platform.python_version()}
    for dist in ("stable-baselines3", "torch", "gymnasium", "numpy", "mujoco", "box2d"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _machine() -> dict:
    import os
    import platform

    model = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_count": os.cpu_count(), "cpu_model": model, "platform": platform.platform()}


def _finite_or_none(x: float):
    return None if x != x else round(x, 4)


def _effective_ppo(model) -> dict:
    """The PPO settings the model actually trained with (zoo values over SB3's defaults)."""
    eff = {k: getattr(model, k) for k in ("n_steps", "batch_size", "n_epochs", "gamma",
                                          "gae_lambda", "ent_coef", "vf_coef", "max_grad_norm",
                                          "use_sde", "sde_sample_freq", "normalize_advantage",
                                          "target_kl")}
    eff["n_envs"] = model.n_envs
    eff["learning_rate_initial"] = float(model.lr_schedule(1.0))
    eff["clip_range_initial"] = float(model.clip_range(1.0))
    eff["vec_normalize"] = model.get_vec_normalize_env() is not None
    eff["net_arch"] = model.policy.net_arch
    eff["activation_fn"] = model.policy.activation_fn.__name__
    eff["ortho_init"] = model.policy.ortho_init
    return eff


def _record(args, model, rec, wall_s: float, setup_s: float, learn_s: float,
            torch_threads: int) -> dict:
    """The run's JSON line: its result, its timings, and the settings and software behind it."""
    import datetime

    hp = ZOO_PPO[args.env]
    eff = _effective_ppo(model)
    return {
        "peer": PEER,
        "env": args.env,
        "seed": args.seed,
        "steps": args.steps,
        "env_steps": int(model.num_timesteps),
        "mean_return_100": _finite_or_none(rec.mean_return()),
        "episodes_in_mean": len(rec.returns),
        "episodes": rec.episodes,
        "wall_s": round(wall_s, 3),
        "setup_s": round(setup_s, 3),
        "learn_s": round(learn_s, 3),
        "steps_per_s": round(model.num_timesteps / wall_s, 1),
        # --stop-at-return: env steps, and seconds from process start (imports included)
        "solved_at_env_steps": rec.solved_at[0] if rec.solved_at else None,
        "target_s_from_process_start": round(rec.solved_at[1], 3) if rec.solved_at else None,
        "torch_threads": torch_threads,
        "hyperparams": hp,
        "hyperparams_source": (ZOO_SOURCE if ZOO_PPO[args.env]["zoo_key"]
                               else "benchmarks/spaces/masked-choice.yaml (dac train's settings)"),
        "ppo_effective": eff,
        "versions": _versions(),
        "machine": _machine(),
        "curve": args.curve,
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import json
    import os
    import time

    try:
        import gymnasium as gym
        import stable_baselines3  # noqa: F401
        import torch
    except ImportError as e:
        print(f"sb3_ppo.py: {e} (install benchmarks/peers/requirements.txt in a separate venv)",
              file=sys.stderr)
        return 1

    torch.set_num_threads(args.torch_threads)
    for path in (args.out, args.curve):
        if path and os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)

    t0 = time.perf_counter()  # after the imports
    try:
        model, env = build(args.env, args.seed)
    except gym.error.DependencyNotInstalled as e:
        print(f"sb3_ppo.py: {args.env} needs a package that is not installed: {e}", file=sys.stderr)
        return 1
    setup_s = time.perf_counter() - t0
    rec = make_callback(args.steps, t0, args.curve, args.stop_at_return)
    t1 = time.perf_counter()
    try:
        model.learn(total_timesteps=args.steps, callback=rec)
    finally:
        rec.close()
        env.close()
    t2 = time.perf_counter()
    record = _record(args, model, rec, wall_s=t2 - t0, setup_s=setup_s, learn_s=t2 - t1,
                     torch_threads=torch.get_num_threads())
    line = json.dumps(record)
    with open(args.out, "a") as f:
        f.write(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("sb3_ppo.py: interrupted", file=sys.stderr)
        sys.exit(130)
