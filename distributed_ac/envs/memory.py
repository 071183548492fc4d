"""Partially observed tasks that a feed-forward policy cannot solve, for recurrent cores.

    dac train --env distributed_ac.envs.memory:CartPoleNoVel --core lstm
    dac train --env distributed_ac.envs.memory:CueMemory --core gru

- CartPoleNoVel: CartPole-v1 with the cart's and the pole's velocities hidden (cart
  position and pole angle only), as rl-zoo's CartPoleNoVel-v1. Velocities have to be
  inferred from successive observations.
- CueMemory: a cue (-1 or +1) shows at the first step only; after `delay` blank steps
  the agent is asked (the second coordinate is 1) and is paid +1 for the action that
  names the cue (0 for -1, 1 for +1) and -1 otherwise. A policy without memory sees
  the same question whatever the cue was: its best expected return is 0; with memory 1.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class CartPoleNoVel(gym.ObservationWrapper):
    def __init__(self, render_mode: str | None = None):
        super().__init__(gym.make("CartPole-v1", render_mode=render_mode))
        box = self.env.observation_space
        keep = [0, 2]  # cart position, pole angle
        self.observation_space = gym.spaces.Box(box.low[keep], box.high[keep], dtype=np.float32)

    def observation(self, observation):
        return observation[[0, 2]].astype(np.float32)


class CueMemory(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, delay: int = 4, render_mode: str | None = None):
        self.delay = delay
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._cue, self._t = 1.0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._cue = float(self.np_random.choice([-1.0, 1.0]))
        self._t = 0
        return np.array([self._cue, 0.0], np.float32), {}

    def step(self, action):
        self._t += 1
        if self._t <= self.delay:  # blank steps, then the question
            asked = float(self._t == self.delay)
            return np.array([0.0, asked], np.float32), 0.0, False, False, {}
        right = int(action) == int(self._cue > 0)
        return np.zeros(2, np.float32), 1.0 if right else -1.0, True, False, {}
