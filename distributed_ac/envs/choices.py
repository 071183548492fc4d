"""Small tasks for the action and observation spaces beyond Discrete and Box, each with a
known optimum so that a learning test can say how close a run came.

    dac train --env distributed_ac.envs.choices:MultiChoice

- MultiChoice: MultiDiscrete([3, 4, 5]) actions. Each step shows a target for every
  component (one-hot, concatenated) and pays 1/3 for each component that names its
  target, so the best return of a 16-step episode is 16 and a uniform policy's is
  16 * (1/3 + 1/4 + 1/5) / 3 ~ 4.2.
- MultiBinaryChoice: the same with MultiBinary(4) actions: the target is a random 0/1
  vector, 1/4 paid per matching bit (uniform: 8).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

EPISODE = 16


class MultiChoice(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, binary: bool = False, render_mode: str | None = None):
        self.nvec = np.full(4, 2) if binary else np.array([3, 4, 5])
        self.action_space = (gym.spaces.MultiBinary(4) if binary
                             else gym.spaces.MultiDiscrete(self.nvec))
        self.observation_space = gym.spaces.Box(0.0, 1.0, (int(self.nvec.sum()),), np.float32)
        self._target = np.zeros(len(self.nvec), np.int64)
        self._t = 0

    def _observe(self) -> np.ndarray:
        obs = np.zeros(int(self.nvec.sum()), np.float32)
        obs[np.cumsum(np.r_[0, self.nvec[:-1]]) + self._target] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._target = self.np_random.integers(0, self.nvec)
        return self._observe(), {}

    def step(self, action):
        action = np.asarray(action)
        if action.shape != self._target.shape:
            raise ValueError(f"MultiChoice takes {len(self.nvec)} choices, got {action.shape}")
        reward = float(np.mean(action == self._target))
        self._t += 1
        self._target = self.np_random.integers(0, self.nvec)
        return self._observe(), reward, False, self._t >= EPISODE, {}


class MultiBinaryChoice(MultiChoice):
    def __init__(self, render_mode: str | None = None):
        super().__init__(binary=True, render_mode=render_mode)
