"""Small tasks for the action and observation spaces beyond Discrete and Box, each with a
known optimum so that a learning test can say how close a run came.

    dac train --env distributed_ac.envs.choices:MultiChoice

- MultiChoice: MultiDiscrete([3, 4, 5]) actions. Each step shows a target for every
  component (one-hot, concatenated) and pays 1/3 for each component that names its
  target, so the best return of a 16-step episode is 16 and a uniform policy's is
  16 * (1/3 + 1/4 + 1/5) / 3 ~ 4.2.
- MultiBinaryChoice: the same with MultiBinary(4) actions: the target is a random 0/1
  vector, 1/4 paid per matching bit (uniform: 8).
- MaskedChoice: Discrete(6) actions and a Dict observation {"obs": the target, one-hot,
  "action_mask"}. Each step 2 of the other 5 actions are not allowed, and they pay
  the most: 3, against 1 for the target and 0 for any other allowed action. A masked
  policy's best return is 16 (the target every step); a policy that ignores the mask
  (the mask is not in "obs") is drawn to the illegal actions (expected 3 x 2/5 = 1.2 a
  step for a non-target action). `illegal_taken` counts them.
- DictChoice: a Dict observation {"target": Discrete(4), "upper": MultiBinary(1)} and
  Discrete(8) actions: 1 for naming the target among the upper four actions when
  "upper" is set, among the lower four when not (action target + 4 x upper). A policy
  that reads only "target" scores 8 at best, only "upper" 4. Optimum 16.
- ImageVectorChoice: a Dict observation {"image": uint8 36 x 36 x 1 with one bright
  quadrant q, "upper": Box(0, 1, (1,)) of 0 or 1} and Discrete(8) actions: 1 for action
  q + 4 x upper. The image alone scores 8 at best, the vector alone 4. Optimum 16.
  ImageChoice and ImageVectorChoice84 / ImageChoice84 (84 x 84 x 4, Atari's frame) are
  the same with and without the vector, for the worker's cost per step.
- MaskedMultiChoice: MultiChoice's MultiDiscrete([3, 4, 5]) with a Dict observation
  {"obs", "action_mask"}: each step one non-target choice of every component is not
  allowed and pays 2/3 (the target 1/3). Masked optimum 16. MaskedImageMultiChoice
  adds an image of the targets beside them.
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
        self._offsets = np.cumsum(np.r_[0, self.nvec[:-1]])  # each component's first entry
        self._target = np.zeros(len(self.nvec), np.int64)
        self._t = 0

    def _observe(self) -> np.ndarray:
        obs = np.zeros(int(self.nvec.sum()), np.float32)
        obs[self._offsets + self._target] = 1.0
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


class MaskedChoice(gym.Env):
    metadata = {"render_modes": []}
    ACTIONS, ILLEGAL = 6, 2

    def __init__(self, render_mode: str | None = None):
        self.action_space = gym.spaces.Discrete(self.ACTIONS)
        self.observation_space = gym.spaces.Dict({
            "obs": gym.spaces.Box(0.0, 1.0, (self.ACTIONS,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (self.ACTIONS,), np.int8)})
        self._target, self._mask, self._t = 0, np.ones(self.ACTIONS, np.int8), 0
        self.illegal_taken = 0

    def _draw(self):
        self._target = int(self.np_random.integers(self.ACTIONS))
        others = [a for a in range(self.ACTIONS) if a != self._target]
        self._mask = np.ones(self.ACTIONS, np.int8)
        self._mask[self.np_random.choice(others, self.ILLEGAL, replace=False)] = 0
        obs = np.zeros(self.ACTIONS, np.float32)
        obs[self._target] = 1.0
        return {"obs": obs, "action_mask": self._mask.copy()}

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action):
        action = int(action)
        if not self._mask[action]:
            self.illegal_taken += 1
            reward = 3.0
        else:
            reward = 1.0 if action == self._target else 0.0
        self._t += 1
        return self._draw(), reward, False, self._t >= EPISODE, {}


class MaskedMultiChoice(MultiChoice):
    def __init__(self, render_mode: str | None = None):
        super().__init__()
        size = int(self.nvec.sum())
        self.observation_space = gym.spaces.Dict({
            "obs": gym.spaces.Box(0.0, 1.0, (size,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (size,), np.int8)})
        self._illegal = np.zeros(len(self.nvec), np.int64)
        self.illegal_taken = 0

    def _observe(self):
        # each component's illegal choice: a random one of the non-target choices
        shift = self.np_random.integers(1, self.nvec)
        self._illegal = (self._target + shift) % self.nvec
        mask = np.ones(int(self.nvec.sum()), np.int8)
        mask[self._offsets + self._illegal] = 0
        return {"obs": super()._observe(), "action_mask": mask}

    def step(self, action):
        action = np.asarray(action)
        illegal = action == self._illegal
        self.illegal_taken += int(illegal.sum())
        reward = float(np.mean(np.where(illegal, 2.0, (action == self._target) * 1.0)))
        obs, _, term, trunc, info = super().step(action)
        return obs, reward, term, trunc, info


class MaskedImageMultiChoice(MaskedMultiChoice):
    """MaskedMultiChoice with an image beside the vector: every component's target also
    drawn as a bright pair of rows (a uint8 36 x 36 x 1 frame)."""

    def __init__(self, render_mode: str | None = None):
        super().__init__()
        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, (36, 36, 1), np.uint8),
            **self.observation_space.spaces})

    def _observe(self):
        image = np.zeros((36, 36, 1), np.uint8)
        for k in self._offsets + self._target:  # choice k of all components: rows 2k, 2k+1
            image[2 * k:2 * k + 2] = 255
        return {"image": image, **super()._observe()}


class DictChoice(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, render_mode: str | None = None):
        self.action_space = gym.spaces.Discrete(8)
        self.observation_space = gym.spaces.Dict({"target": gym.spaces.Discrete(4),
                                                  "upper": gym.spaces.MultiBinary(1)})
        self._obs, self._t = {}, 0

    def _draw(self):
        self._obs = {"target": int(self.np_random.integers(4)),
                     "upper": self.np_random.integers(0, 2, 1).astype(np.int8)}
        return self._obs

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action):
        right = self._obs["target"] + 4 * int(self._obs["upper"][0])
        self._t += 1
        return self._draw(), float(int(action) == right), False, self._t >= EPISODE, {}


class ImageVectorChoice(gym.Env):
    metadata = {"render_modes": []}
    size, channels, vector = 36, 1, True

    def __init__(self, render_mode: str | None = None):
        self.action_space = gym.spaces.Discrete(8 if self.vector else 4)
        image = gym.spaces.Box(0, 255, (self.size, self.size, self.channels), np.uint8)
        self.observation_space = (gym.spaces.Dict({
            "image": image, "upper": gym.spaces.Box(0.0, 1.0, (1,), np.float32)})
            if self.vector else image)
        self._quadrant, self._upper, self._t = 0, 0, 0

    def _draw(self):
        self._quadrant, self._upper = (int(x) for x in self.np_random.integers(0, (4, 2)))
        image = np.zeros(self.observation_space["image"].shape if self.vector
                         else self.observation_space.shape, np.uint8)
        half = self.size // 2
        row, col = divmod(self._quadrant, 2)
        image[row * half:(row + 1) * half, col * half:(col + 1) * half] = 255
        if not self.vector:
            return image
        return {"image": image, "upper": np.array([self._upper], np.float32)}

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action):
        right = self._quadrant + (4 * self._upper if self.vector else 0)
        self._t += 1
        return self._draw(), float(int(action) == right), False, self._t >= EPISODE, {}


class ImageChoice(ImageVectorChoice):
    vector = False


class ImageVectorChoice84(ImageVectorChoice):
    size, channels = 84, 4


class ImageChoice84(ImageVectorChoice84):
    vector = False


class ImageVectorMultiChoice(MultiChoice):
    """MultiChoice's MultiDiscrete([3, 4, 5]) read from a Dict of a uint8 48 x 48 x 1 image
    and two vectors: the first two components' targets drawn as bright bands of rows
    (component 0) and columns (component 1), the third's target one-hot in "target" and
    the step count in "time". The image alone scores 16 x (1 + 1 + 1/5) / 3 ~ 11.7 at
    best, the vector alone 16 x (1/3 + 1/4 + 1) / 3 ~ 8.4; optimum 16."""

    SIZE = 48

    def __init__(self, render_mode: str | None = None):
        super().__init__()
        self.observation_space = gym.spaces.Dict({
            "image": gym.spaces.Box(0, 255, (self.SIZE, self.SIZE, 1), np.uint8),
            "target": gym.spaces.Box(0.0, 1.0, (int(self.nvec[2]),), np.float32),
            "time": gym.spaces.Box(0.0, 1.0, (1,), np.float32)})

    def _observe(self):
        image = np.zeros((self.SIZE, self.SIZE, 1), np.uint8)
        rows, cols = self.SIZE // self.nvec[0], self.SIZE // self.nvec[1]
        image[rows * self._target[0]:rows * (self._target[0] + 1)] = 255
        image[:, cols * self._target[1]:cols * (self._target[1] + 1)] = 128
        target = np.zeros(int(self.nvec[2]), np.float32)
        target[self._target[2]] = 1.0
        return {"image": image, "target": target,
                "time": np.array([self._t / EPISODE], np.float32)}
