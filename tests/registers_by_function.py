"""A package that registers its env id only when its register_envs() is called, as
MinAtar's minatar.gym does (tests/e2e/test_gym_packages.py); each call appends this
process's pid to the file named by DAC_TEST_PKG_LOG."""

import os

import gymnasium as gym

ENV_ID = "DacTestFn-v0"


def register_envs() -> None:
    gym.register(ENV_ID, entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
                 max_episode_steps=500)
    path = os.environ.get("DAC_TEST_PKG_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {ENV_ID}\n")
