"""A small door-and-key grid with a sparse reward, coded as MiniGrid codes its grids, for
tests and for measuring how a run reads categorical observations and explores.

    dac train --env distributed_ac.envs.grids:KeyDoor

KeyDoor: a SIZE x SIZE grid inside a wall, split by a wall column with one locked door.
The agent starts in the left room, a key lies somewhere in it, and the goal is in the
right room; every position is drawn anew each episode. Actions move the agent one cell
left, right, up or down; stepping onto the key picks it up, stepping into the door with
the key opens it. Reaching the goal ends the episode with MiniGrid's reward, 1 - 0.9 x
steps / max_steps (0 if it is not reached within max_steps, 2 x SIZE^2 = 98 steps). A
shortest path (about 12 steps) scores about 0.89; a uniform random policy 0.03 (it
reaches the goal in 8% of its episodes).

The observation is the whole grid as uint8 codes in a Box of high 255, three channels
like MiniGrid's `image`: the object (OBJECTS), a colour id, and a state (the door's: 0
open, 2 locked; the agent's: 1 while it holds the key). Read as pixels (1/255), its
values stay under 0.03.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

OBJECTS = {"empty": 1, "wall": 2, "key": 5, "door": 4, "goal": 8, "agent": 10}
COLOURS = {"empty": 0, "wall": 5, "key": 4, "door": 4, "goal": 1, "agent": 0}
MOVES = ((0, -1), (0, 1), (-1, 0), (1, 0))  # left, right, up, down as (row, col)


class KeyDoor(gym.Env):
    metadata = {"render_modes": []}
    SIZE = 7  # the inside, without the outer wall

    def __init__(self, render_mode: str | None = None):
        side = self.SIZE + 2
        self.max_steps = 2 * self.SIZE * self.SIZE
        self.observation_space = gym.spaces.Box(0, 255, (side, side, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(MOVES))
        self.wall_col = 1 + self.SIZE // 2
        self.door = self.agent = self.key = self.goal = (0, 0)
        self.has_key = self.door_open = False
        self._t = 0

    def _cell(self, cols: range) -> tuple[int, int]:
        return (int(self.np_random.integers(1, self.SIZE + 1)),
                int(self.np_random.choice(list(cols))))

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        left, right = range(1, self.wall_col), range(self.wall_col + 1, self.SIZE + 1)
        self.door = (int(self.np_random.integers(1, self.SIZE + 1)), self.wall_col)
        self.agent = self._cell(left)
        self.key = self.agent
        while self.key == self.agent:
            self.key = self._cell(left)
        self.goal = self._cell(right)
        self.has_key = self.door_open = False
        self._t = 0
        return self._observe(), {}

    def _observe(self) -> np.ndarray:
        side = self.SIZE + 2
        grid = np.zeros((side, side, 3), np.uint8)
        grid[..., 0] = OBJECTS["empty"]
        grid[[0, -1], :] = grid[:, [0, -1]] = grid[:, self.wall_col] = (
            OBJECTS["wall"], COLOURS["wall"], 0)
        grid[self.door] = (OBJECTS["door"], COLOURS["door"], 0 if self.door_open else 2)
        grid[self.goal] = (OBJECTS["goal"], COLOURS["goal"], 0)
        if not self.has_key:
            grid[self.key] = (OBJECTS["key"], COLOURS["key"], 0)
        grid[self.agent] = (OBJECTS["agent"], COLOURS["agent"], int(self.has_key))
        return grid

    def _free(self, cell: tuple[int, int]) -> bool:
        row, col = cell
        if cell == self.door:
            if not self.door_open and self.has_key:
                self.door_open = True  # stepping into it with the key opens it
            return self.door_open
        return 0 < row <= self.SIZE and 0 < col <= self.SIZE and col != self.wall_col

    def step(self, action):
        self._t += 1
        dr, dc = MOVES[int(action)]
        target = (self.agent[0] + dr, self.agent[1] + dc)
        if self._free(target):
            self.agent = target
        if self.agent == self.key and not self.has_key:
            self.has_key = True
        reached = self.agent == self.goal
        reward = 1.0 - 0.9 * self._t / self.max_steps if reached else 0.0
        return self._observe(), reward, reached, self._t >= self.max_steps and not reached, {}
