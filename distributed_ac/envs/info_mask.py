"""Action masks that an env gives in `info["action_mask"]` instead of its observation
(Gymnasium's Taxi: which actions change the state), read as every other mask is.

`InfoActionMask` makes the observation the Dict {"obs": the env's own observation,
"action_mask": the mask}, so envs/structured.py reads the mask from its usual key and the
workers, the learner, `dac evaluate` and the export apply it like any Dict's mask (1 =
allowed). Config.info_action_mask turns it on for each sub-env and the evaluator's env.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from distributed_ac.core.errors import EnvError
from distributed_ac.envs.structured import MASK_KEY

OBS_KEY = "obs"


class InfoActionMask(gym.Wrapper):
    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.action_space
        if isinstance(space, gym.spaces.Discrete):
            n = int(space.n)
        elif isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
            n = int(np.sum(space.nvec)) if hasattr(space, "nvec") else 2 * int(space.n)
        else:
            raise EnvError(f"info_action_mask needs Discrete, MultiDiscrete or MultiBinary "
                           f"actions; the env's action space is {space}")
        self.observation_space = gym.spaces.Dict({OBS_KEY: env.observation_space,
                                                  MASK_KEY: gym.spaces.MultiBinary(n)})

    def _observe(self, obs, info: dict) -> dict:
        mask = info.get(MASK_KEY)
        if mask is None:
            raise EnvError(f"info_action_mask is set but the env's info has no "
                           f"'{MASK_KEY}' (its keys: {sorted(info)})")
        return {OBS_KEY: obs, MASK_KEY: np.asarray(mask, np.int8)}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._observe(obs, info), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observe(obs, info), reward, terminated, truncated, info
