"""A package that registers its env id on import, as minigrid, shimmy and popgym do
(tests/e2e/test_gym_packages.py). Each import appends this process's pid to the file
named by DAC_TEST_PKG_LOG, so a test can count the processes that imported it."""

import os

import gymnasium as gym

ENV_ID = "DacTestPkg-v0"


def log_import(what: str) -> None:
    path = os.environ.get("DAC_TEST_PKG_LOG")
    if path:
        with open(path, "a") as f:  # one short line per write: whole lines from each process
            f.write(f"{os.getpid()} {what}\n")


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
                 max_episode_steps=500)
log_import(ENV_ID)
