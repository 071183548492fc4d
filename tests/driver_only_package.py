"""A package installed where the driver runs but not on the workers' node: it registers
DacTestNode-v0 when imported by the driver and fails to import in a Ray worker process
(started as ray/_private/workers/default_worker.py), as a package missing there would."""

import sys

import gymnasium as gym

ENV_ID = "DacTestNode-v0"

if sys.argv and sys.argv[0].endswith("default_worker.py"):
    raise ModuleNotFoundError("No module named 'driver_only_package' (not on this node)")
if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
                 max_episode_steps=500)
