"""Small tasks for the observation spaces users' envs bring beyond a vector Box, each
with a known optimum (16 over a 16-step episode, 1 a step for the right action) so that
a learning test can say whether the policy reads its observation at all.

    dac train --env distributed_ac.envs.obs_choices:IndexChoice

- IndexChoice: a bare Discrete(8, start=2) observation (FrozenLake's and Taxi's kind);
  the right action is the index less its start. Uniform: 2.
- PairChoice: a MultiDiscrete([2, 4]) observation; the right one of 8 actions is
  4 x first + second, so it needs both components. Reading one: 8 or 4 at best.
- TextChoice: a Dict {"mission": Text, "level": Box(0, 1, (1,))} whose mission reads
  "go to the north door" (or east, south, west); the right action is the direction. Text
  left out (the default), the policy scores 4; read as a bag of words (--text-obs hash),
  16.
- GridChoice: a 6 x 6 x 2 bool image (MinAtar's kind: one channel per object), one
  3 x 3 quadrant lit in channel 0; the right action is the quadrant. Uniform: 4.
  FrameChoice is the same as a rank-2 8 x 8 uint8 frame (lit quadrant 255).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

EPISODE = 16
DIRECTIONS = ("north", "east", "south", "west")


class _Choice(gym.Env):
    """Each step draws an observation whose one right action pays 1."""

    metadata = {"render_modes": []}

    def __init__(self, render_mode: str | None = None):
        self._right, self._t = 0, 0

    def _draw(self):
        raise NotImplementedError

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action):
        reward = float(int(action) == self._right)
        self._t += 1
        return self._draw(), reward, False, self._t >= EPISODE, {}


class IndexChoice(_Choice):
    observation_space = gym.spaces.Discrete(8, start=2)
    action_space = gym.spaces.Discrete(8)

    def _draw(self):
        self._right = int(self.np_random.integers(8))
        return self._right + 2


class PairChoice(_Choice):
    observation_space = gym.spaces.MultiDiscrete([2, 4])
    action_space = gym.spaces.Discrete(8)

    def _draw(self):
        pair = self.np_random.integers(0, (2, 4))
        self._right = int(4 * pair[0] + pair[1])
        return pair


class TextChoice(_Choice):
    observation_space = gym.spaces.Dict({
        "mission": gym.spaces.Text(32, charset="abcdefghijklmnopqrstuvwxyz "),
        "level": gym.spaces.Box(0.0, 1.0, (1,), np.float32)})
    action_space = gym.spaces.Discrete(4)

    def _draw(self):
        self._right = int(self.np_random.integers(4))
        return {"mission": f"go to the {DIRECTIONS[self._right]} door",
                "level": self.np_random.random(1).astype(np.float32)}


class GridChoice(_Choice):
    shape, dtype, lit = (6, 6, 2), np.bool_, True
    action_space = gym.spaces.Discrete(4)

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode)
        high = 1 if self.dtype == np.bool_ else 255
        self.observation_space = gym.spaces.Box(0, high, self.shape, self.dtype)

    def _draw(self):
        self._right = int(self.np_random.integers(4))
        image = np.zeros(self.shape, self.dtype)
        half = self.shape[0] // 2
        row, col = divmod(self._right, 2)
        quadrant = image[row * half:(row + 1) * half, col * half:(col + 1) * half]
        if quadrant.ndim == 3:
            quadrant = quadrant[..., 0]  # channel 0 only: the others stay dark
        quadrant[...] = self.lit
        return image


class FrameChoice(GridChoice):
    shape, dtype, lit = (8, 8), np.uint8, 255
