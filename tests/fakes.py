"""Small deterministic environments for unit tests that isolate one piece.

`Countdown` lets a test know exactly where episodes end and how: every episode lasts
`length` steps, observation = [steps taken], reward = 1 per step, and it ends by
termination or by truncation as asked. Anything learning-related uses real Gymnasium
environments instead.
"""

import os
import time

import gymnasium as gym
import numpy as np


class Countdown(gym.Env):
    def __init__(self, length: int = 3, truncate: bool = False):
        self.length, self.truncate = length, truncate
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0]), {}

    def step(self, action):
        self.t += 1
        end = self.t >= self.length
        return (np.array([float(self.t)]), 1.0, end and not self.truncate,
                end and self.truncate, {})


class CountdownTruncated(Countdown):
    def __init__(self):
        super().__init__(length=3, truncate=True)


class TupleActionEnv(Countdown):
    """Same dynamics, an action space the trainer refuses."""

    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3)))


class ExplodingEnv(Countdown):
    def step(self, action):
        raise RuntimeError("boom at step")


class NaNOnce(Countdown):
    """Returns a NaN observation once, at step 2 of its first episode, then behaves."""

    def __init__(self):
        super().__init__(length=5)
        self.poisoned = False

    def step(self, action):
        obs, r, te, tr, info = super().step(action)
        if not self.poisoned and self.t == 2:
            self.poisoned = True
            obs = np.array([np.nan])
        return obs, r, te, tr, info


class StaysNaN(Countdown):
    """From step 2 of its first episode on, every observation is NaN, after resets too:
    an env broken for good."""

    broken = False

    def step(self, action):
        obs, r, te, tr, info = super().step(action)
        self.broken = self.broken or self.t >= 2
        return (np.array([np.nan]) if self.broken else obs), r, te, tr, info

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        return (np.array([np.nan]) if self.broken else obs), info


class WrongShapeReset(Countdown):
    """Declares observations of shape (1,) but resets to shape (3,)."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3), {}


class ThousandSteps(Countdown):
    """Episodes of exactly 1000 steps (terminated), for checks that no episode is cut."""

    def __init__(self):
        super().__init__(length=1000)


OBS_SCALE, OBS_OFFSET = np.float32(1000.0), np.float32(1000.0)


def ScaledCartPole(**kwargs):
    """CartPole-v1 with observations x -> 1000 x + 1000: the offset drives every tanh
    unit of a plain MLP into saturation, whatever the state; normalising undoes it."""
    env = gym.make("CartPole-v1", **kwargs)
    f = lambda o: (o * OBS_SCALE + OBS_OFFSET).astype(np.float32)  # noqa: E731
    space = gym.spaces.Box(f(env.observation_space.low), f(env.observation_space.high),
                           dtype=np.float32)
    return gym.wrappers.TransformObservation(env, f, space)


class LivesGame(Countdown):
    """An ALE-like game of `lives` lives: each life lasts `life_length` steps with reward
    `reward` per step, info["lives"] counts down, and the game terminates with the last
    life. `resets` counts real resets, so a test can tell a new game from a next life."""

    def __init__(self, lives: int = 3, life_length: int = 4, reward: float = 5.0):
        super().__init__(length=lives * life_length)
        self.max_lives, self.life_length, self.reward = lives, life_length, reward
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        obs, _ = super().reset(seed=seed)
        return obs, {"lives": self.max_lives}

    def step(self, action):
        obs, _, terminated, truncated, _ = super().step(action)
        lives = self.max_lives - self.t // self.life_length
        return obs, self.reward, terminated, truncated, {"lives": lives}


def AtariLikeLivesGame():
    """LivesGame under atari.py's training wrappers (what ALE ids get, less the pixels)."""
    from distributed_ac.envs import atari

    return atari.ClipRewardToSign(atari.EpisodicLife(atari.GameScore(LivesGame())))


class PixelChase(gym.Env):
    """A tiny image env for CNN tests: a GRID x GRID board drawn as a 36 x 36 x 1 uint8
    image (36 px is the least the Nature CNN reads), the agent's cell at 255 and the
    target's at 128. Actions 0-3 move up, down, left, right (a wall stops the move);
    reaching the target gives reward 1 and terminates; an episode is truncated after
    MAX_STEPS. Both cells start at random, apart. A policy has to see where the two are:
    the image is the whole state."""

    GRID, CELL, MAX_STEPS = 4, 9, 12
    MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1)])

    def __init__(self, render_mode=None):  # evaluate passes render_mode
        self.render_mode = render_mode
        size = self.GRID * self.CELL
        self.observation_space = gym.spaces.Box(0, 255, (size, size, 1), np.uint8)
        self.action_space = gym.spaces.Discrete(4)

    def _image(self) -> np.ndarray:
        img = np.zeros(self.observation_space.shape, np.uint8)
        for (r, c), value in ((self.target, 128), (self.agent, 255)):
            img[r * self.CELL:(r + 1) * self.CELL, c * self.CELL:(c + 1) * self.CELL] = value
        return img

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        cells = self.np_random.choice(self.GRID * self.GRID, 2, replace=False)
        self.agent, self.target = (np.array(divmod(int(i), self.GRID)) for i in cells)
        self.t = 0
        return self._image(), {}

    def step(self, action):
        self.t += 1
        self.agent = np.clip(self.agent + self.MOVES[int(action)], 0, self.GRID - 1)
        reached = bool((self.agent == self.target).all())
        return self._image(), float(reached), reached, self.t >= self.MAX_STEPS and not reached, {}


class Masked(Countdown):
    """Countdown with a Dict observation {obs, action_mask}; the mask allows action 1 only
    (or nothing from step `stuck_at` on), over `actions` Discrete actions."""

    def __init__(self, actions: int = 2, mask_len: int | None = None, stuck_at: int = 99,
                 box_actions: bool = False):
        super().__init__(length=5)
        self.stuck_at = stuck_at
        n = mask_len or actions
        self.action_space = (gym.spaces.Box(-1, 1, (actions,), np.float32) if box_actions
                             else gym.spaces.Discrete(actions))
        self.observation_space = gym.spaces.Dict({
            "obs": gym.spaces.Box(-np.inf, np.inf, (1,), np.float64),
            "action_mask": gym.spaces.Box(0, 1, (n,), np.int8)})
        self.mask = np.zeros(n, np.int8)

    def _wrap(self, obs):
        self.mask = np.zeros_like(self.mask)
        if self.t < self.stuck_at:
            self.mask[1] = 1
        return {"obs": obs, "action_mask": self.mask}

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed)
        return self._wrap(obs), info

    def step(self, action):
        if not self.mask[int(action)]:
            raise AssertionError(f"masked action {action} taken")
        obs, *rest = super().step(action)
        return (self._wrap(obs), *rest)


class MaskedStuck(Masked):
    """Its mask allows nothing from the third step of an episode on."""

    def __init__(self):
        super().__init__(actions=3, stuck_at=2)


class MaskedBoxActions(Masked):
    def __init__(self):
        super().__init__(box_actions=True)


class MaskedWrongLength(Masked):
    def __init__(self):
        super().__init__(actions=3, mask_len=4)


class SlowToEvaluate(Countdown):
    """Countdown whose episodes are slow only where evaluation plays them: an episode
    reset with a seed of 2**31 or more (evaluation's seeds; training's are all below)
    sleeps SLEEP_S a step, so an evaluation takes seconds while training runs at speed."""

    SLEEP_S = 0.2

    def __init__(self):
        super().__init__(length=5)
        self.slow = False

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.slow = seed >= 2**31
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.slow:
            import time

            time.sleep(self.SLEEP_S)
        return super().step(action)


class GatedCartPole(gym.Wrapper):
    """CartPole-v1 that, once this process's sub-envs have taken GATE_AFTER steps in all,
    holds every further step while the file named by $DAC_TEST_GATE exists: a test
    stops a run there (and resumes it with the file gone) without racing its end."""

    GATE_AFTER = 1024
    steps = 0  # over every sub-env in this process

    def __init__(self, **kwargs):
        super().__init__(gym.make("CartPole-v1", **kwargs))

    def step(self, action):
        GatedCartPole.steps += 1
        gate = os.environ.get("DAC_TEST_GATE")
        while gate and GatedCartPole.steps > self.GATE_AFTER and os.path.exists(gate):
            time.sleep(0.05)
        return self.env.step(action)


class FakeTuneSession:
    """What a trial needs of Ray Tune (tuning.trial.TuneSession), in-process: the trial
    directory, the checkpoint to start from, and the reports, each checkpoint copied."""

    def __init__(self, trial_dir, start_from=None):
        self.dir, self.start_from = trial_dir, start_from
        self.dir.mkdir(parents=True, exist_ok=True)
        self.reports: list[tuple[dict, object]] = []

    def checkpoint_dir(self):
        import contextlib

        return contextlib.nullcontext(self.start_from) if self.start_from else None

    def trial_dir(self):
        return self.dir

    def trial_index(self) -> int:
        return 0

    def report(self, metrics: dict, checkpoint_dir) -> None:
        import shutil

        kept = self.dir / f"reported_{len(self.reports):03d}"
        shutil.copytree(checkpoint_dir, kept)
        self.reports.append((metrics, kept))


class GraphObs(Countdown):
    """A Graph observation: nodes and edges of varying count, no fixed width to read."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None)


class SpaceSample(gym.Env):
    """An env that observes samples of the observation space it is given (a test of how
    a space is read needs nothing more)."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, space):
        self.observation_space = space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}


class DoomLike(gym.Env):
    """VizDoom's observation shape, small enough to step fast: a Dict of a 240 x 320 x 3
    uint8 `screen` (a bright square where the target is, in one of four quadrants) and
    unbounded `gamevariables` (health around 100, ammo in the tens); Discrete(4) actions,
    1 for naming the quadrant, 8-step episodes."""

    H, W, EPISODE = 240, 320, 8

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Dict({
            "screen": gym.spaces.Box(0, 255, (self.H, self.W, 3), np.uint8),
            # float32's largest as bounds, as VizDoom gives them: no bound at all
            "gamevariables": gym.spaces.Box(np.finfo(np.float32).min, np.finfo(np.float32).max, (2,), np.float32)})
        self.action_space = gym.spaces.Discrete(4)
        self.quadrant, self.t = 0, 0

    def _obs(self):
        self.quadrant = int(self.np_random.integers(4))
        screen = np.full((self.H, self.W, 3), 40, np.uint8)
        row, col = divmod(self.quadrant, 2)
        h, w = self.H // 2, self.W // 2
        screen[row * h:(row + 1) * h, col * w:(col + 1) * w] = 220
        variables = np.array([100.0 - 5 * self.t, 50.0 + self.np_random.normal()], np.float32)
        return {"screen": screen, "gamevariables": variables}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == self.quadrant)
        self.t += 1
        return self._obs(), reward, False, self.t >= self.EPISODE, {}


class BigFrame(DoomLike):
    """DoomLike's screen alone, as a Box observation."""

    def __init__(self, render_mode=None):
        super().__init__(render_mode)
        self.observation_space = self.observation_space["screen"]

    def _obs(self):
        return super()._obs()["screen"]


def made_cartpole(**kwargs):
    """CartPole-v1 made by a function: an entry point whose env has a spec.id of its own."""
    return gym.make("CartPole-v1", **kwargs)


def made_popgym(**kwargs):
    """A popgym env made by a function (its package imported by --gym-packages)."""
    return gym.make("popgym-RepeatPreviousEasy-v0", **kwargs)


class BlocksAfter(Countdown):
    """Countdown until the process stepping it has taken STEPS steps (over all its
    sub-envs), then a step that blocks for ten minutes, as a hung simulator's would. Where
    $DAC_TEST_BLOCK_MARK names a file, the blocking process writes its pid there first,
    so a test waits on that instead of on time."""

    STEPS = 2000
    taken = 0  # this process's steps, every sub-env's

    def step(self, action):
        BlocksAfter.taken += 1
        if BlocksAfter.taken > self.STEPS:
            mark = os.environ.get("DAC_TEST_BLOCK_MARK")
            if mark:
                with open(mark, "a") as f:
                    f.write(f"{os.getpid()}\n")
            time.sleep(600)
        return super().step(action)
