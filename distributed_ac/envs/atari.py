"""Atari (ALE) and image-env preprocessing; envs/vector.py's make_vector_env applies it
to each sub-env.

ALE ids (`ALE/Pong-v5`, `ALE/Breakout-v5`, ...) get the standard stack of Mnih et al.
(2015), as SB3 and cleanRL apply it, from Gymnasium's own wrappers:

- the ALE env is made with frameskip=1, so that AtariPreprocessing does the skipping:
  up to 30 no-op actions at reset, frame skip 4 with the max over the last two frames
  (Atari sprites flicker), 84x84 grayscale;
- a 4-frame stack, channels last: observations are uint8 [84, 84, 4];
- training only: episodic life (a lost life is `terminated` for the learner, but the
  reset that follows continues the game instead of starting a new one; Gymnasium's own
  terminal_on_life_loss restarts the whole game, so a learner would never see the later
  lives) and rewards clipped to their sign.

Sticky actions: v5 ids repeat the agent's previous action with probability 0.25 on every
frame (Machado et al. 2018); config `sticky_actions` keeps that (the default) or sets
another probability, 0 for the deterministic ALE of the older papers.

Reports count the game, not the learning signal: `GameScore` sits directly above the
frame skip, below episodic life and clipping, and when the game (all lives) ends it puts
the raw score and the agent steps played in `info` (GAME_SCORE, GAME_LENGTH);
acting/worker.py reports those episodes instead of its own per-life sums of clipped rewards.
Evaluation builds the stack with `training=False`, whose episodes are whole games with
raw rewards.

Other image envs (CarRacing-v3, ...) get what envs/reading.py settles from their
first observations (a grid of codes read as categories, a frame over 128 px resized to
84 x 84) and what the config asks: `frame_size` (reading.ResizeFrame, which also reaches
a Dict's image entry), `grayscale` (GrayscaleObservation) and `frame_stack`
(FrameStackObservation), also channels last, so observations are uint8 [H, W, C].
"""

from __future__ import annotations

import dataclasses
import os

import gymnasium as gym
import numpy as np

from distributed_ac.core.errors import MissingDependency
from distributed_ac.envs import reading
from distributed_ac.envs.info_mask import InfoActionMask

GAME_SCORE, GAME_LENGTH = "game_score", "game_length"  # info keys, set when a game ends
ALE_SIZE, ALE_STACK, ALE_NOOP_MAX, ALE_FRAME_SKIP = 84, 4, 30, 4


@dataclasses.dataclass(frozen=True)
class Preprocess:
    """What is done to each sub-env's observations and rewards (see the module docstring).

    0 / None mean auto: for ALE ids 84, True and 4; for other envs colour kept and no
    stack, and a frame_size that envs/reading.py settles before any env is made (-1: the
    env's own size)."""

    frame_size: int = 0
    grayscale: bool | None = None
    frame_stack: int = 0
    sticky_actions: float | None = None  # None: the env's own (0.25 for ALE v5 ids)
    training: bool = True  # ALE: episodic life and reward clipping
    info_mask: bool = False  # non-ALE: info["action_mask"] read as the observation's mask
    categories: bool = False  # non-ALE: the image read as a grid of codes (reading.py)

    @classmethod
    def of(cls, cfg, training: bool = True) -> "Preprocess":
        """From a Config's env fields."""
        return cls(cfg.frame_size, cfg.grayscale, cfg.frame_stack, cfg.sticky_actions, training,
                   cfg.info_action_mask, bool(cfg.categorical_obs))

    def ale(self) -> tuple[int, bool, int]:
        """(frame size, grayscale, frames stacked) for an ALE id, autos resolved."""
        return (self.frame_size if self.frame_size > 0 else ALE_SIZE,
                True if self.grayscale is None else self.grayscale,
                self.frame_stack or ALE_STACK)

    @property
    def wanted(self) -> bool:
        """Whether a non-ALE env gets any wrapper at all."""
        return bool(self.frame_size > 0 or self.grayscale or self.frame_stack > 1
                    or self.categories)


def is_ale(env_id: str) -> bool:
    """An Arcade Learning Environment id (registered by ale_py)."""
    if env_id.startswith("ALE/"):
        return True
    spec = gym.registry.get(env_id)
    return spec is not None and isinstance(spec.entry_point, str) and spec.entry_point.startswith("ale_py")


def register_ale(env: str) -> None:
    """Register the ALE/ ids for an ALE/ id: Gymnasium 1.x registers them only once ale_py
    is imported, which nothing else here does."""
    if not env.startswith("ALE/") or env in gym.registry:
        return
    try:
        import ale_py
    except ImportError:

        raise MissingDependency(f"'{env}' needs ale-py: pip install -e \".[atari]\"") from None
    gym.register_envs(ale_py)


def reports_game_scores(env_id: str) -> bool:
    """Whether make_vector_env's sub-envs put whole-game scores in `info` (GameScore)."""
    return is_ale(env_id)


def frame_skip(env: str) -> int:
    """Emulator frames per agent step (bench reports frames/s with it)."""
    return ALE_FRAME_SKIP if is_ale(env) else 1


def games_ended(infos: dict):
    """(raw scores, lengths, sub-envs) of the games that ended in this vector step, or None.

    Read on reset steps too: EpisodicLife's reset can end a game (module docstring)."""
    mask = infos.get("_" + GAME_SCORE)
    if mask is None or not np.any(mask):
        return None
    return (np.asarray(infos[GAME_SCORE], np.float64)[mask],
            np.asarray(infos[GAME_LENGTH], np.int64)[mask], np.flatnonzero(mask))


def ale_make_kwargs(p: Preprocess) -> dict:
    """gym.make / make_vec keyword arguments of an ALE env under this preprocessing."""
    kwargs = {"frameskip": 1}  # AtariPreprocessing skips, with its max-pool
    if p.sticky_actions is not None:
        kwargs["repeat_action_probability"] = p.sticky_actions
    return kwargs


def ale_wrappers(p: Preprocess) -> list:
    """The wrappers, innermost first, that turn a frameskip=1 ALE env into the agent's env."""
    size, gray, stack = p.ale()
    wrappers = [
        lambda env: gym.wrappers.AtariPreprocessing(
            env, noop_max=ALE_NOOP_MAX, frame_skip=ALE_FRAME_SKIP, screen_size=size,
            terminal_on_life_loss=False, grayscale_obs=gray, grayscale_newaxis=True),
        GameScore,
        *stack_wrappers(stack),
    ]
    # Above the stack, so that the frames of a game stack on across a lost life, as in
    # evaluation (no episodic life) and in AtariVectorEnv
    return wrappers + [EpisodicLife, ClipRewardToSign] if p.training else wrappers


def image_wrappers(p: Preprocess) -> list:
    """Resize, grayscale and stack for a non-ALE image env, as the config asks (and, outermost,
    the action mask from info: envs/info_mask.py)."""
    wrappers = []
    if p.categories:
        wrappers.append(reading.CategoryGrid)
    if p.frame_size > 0:
        wrappers.append(lambda env: reading.ResizeFrame(env, p.frame_size))
    if p.grayscale:
        wrappers.append(lambda env: gym.wrappers.GrayscaleObservation(env, keep_dim=True))
    return wrappers + stack_wrappers(p.frame_stack) + ([InfoActionMask] if p.info_mask else [])


def stack_wrappers(k: int) -> list:
    """FrameStackObservation gives [k, H, W, C]; the networks want channels last."""
    if k <= 1:
        return []
    # Zero padding at reset, as ale_py's AtariVectorEnv pads: the two builds of an ALE
    # env then give the same observations, pixel for pixel.
    return [lambda env: gym.wrappers.FrameStackObservation(env, k, padding_type="zero"),
            _channels_last]


def _channels_last(env: gym.Env) -> gym.Env:
    """[k, H, W, C] -> [H, W, k*C], frame-major: channels 0..C-1 are the oldest frame."""
    k, h, w, c = env.observation_space.shape

    def f(obs):
        return np.moveaxis(np.asarray(obs), 0, 2).reshape(h, w, k * c)

    space = env.observation_space
    low, high = f(space.low), f(space.high)
    return gym.wrappers.TransformObservation(env, f, gym.spaces.Box(low, high, dtype=space.dtype))


def make_single(env_id: str, p: Preprocess, **make_kwargs) -> gym.Env:
    """One preprocessed env (dac evaluate; tests), as make_vector_env makes each sub-env."""
    if is_ale(env_id):
        env, wrappers = gym.make(env_id, **ale_make_kwargs(p), **make_kwargs), ale_wrappers(p)
    else:
        env, wrappers = gym.make(env_id, **make_kwargs), image_wrappers(p)
    for wrap in wrappers:
        env = wrap(env)
    return env


class GameScore(gym.Wrapper):
    """Sum raw rewards and count agent steps over a whole game; at its end (the env's own
    terminated or truncated, which AtariPreprocessing passes on unchanged when
    terminal_on_life_loss is off) put them in info[GAME_SCORE] and info[GAME_LENGTH].

    Placed below EpisodicLife, so the no-op step that it plays after a lost life is
    counted too: it is part of the game."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.score, self.length = 0.0, 0

    def reset(self, **kwargs):
        self.score, self.length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.score += float(reward)
        self.length += 1
        if terminated or truncated:
            info = {**info, GAME_SCORE: self.score, GAME_LENGTH: self.length}
        return obs, reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper):
    """A lost life is `terminated`; the reset after it continues the game (one no-op
    step, past the life-loss frame) unless the game is over, or a seed is given.

    Lives are read from info["lives"], which ALE puts in every step and reset info."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def reset(self, *, seed=None, options=None):
        if self.game_over or seed is not None or options:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the game ended in that step: start a new one,
                ended = {k: info[k] for k in (GAME_SCORE, GAME_LENGTH) if k in info}
                obs, info = self.env.reset()
                info = {**info, **ended}  # and keep its score (rollout reads reset infos too)
        self.lives = int(info.get("lives", 0))
        self.game_over = False
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = bool(terminated or truncated)
        lives = int(info.get("lives", 0))
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info


class ClipRewardToSign(gym.RewardWrapper):
    """The learner sees sign(reward): one scale for every game (Mnih et al. 2015)."""

    def reward(self, reward):
        return float(np.sign(reward))


def make_ale_vector(env_id: str, num_envs: int, p: Preprocess) -> gym.vector.VectorEnv:
    """ale_py's AtariVectorEnv (C++: frame skip, max-pool, resize, stack) with the same
    preprocessing as ale_wrappers, wrapped in AleGames; one thread per CPU this worker has."""
    from ale_py.vector_env import AtariVectorEnv

    spec = gym.spec(env_id)
    size, gray, stack = p.ale()
    venv = AtariVectorEnv(
        spec.kwargs["game"], num_envs,
        num_threads=max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))),
        max_num_frames_per_episode=spec.kwargs.get("max_num_frames_per_episode", 108_000),
        repeat_action_probability=(spec.kwargs.get("repeat_action_probability", 0.25)
                                   if p.sticky_actions is None else p.sticky_actions),
        img_height=size, img_width=size, grayscale=gray,
        stack_num=stack, frameskip=ALE_FRAME_SKIP, noop_max=ALE_NOOP_MAX,
        # life_loss_info: `terminated` at a lost life and the game goes on (episodic_life
        # would restart it); AleGames clips, so the raw rewards are there to report.
        episodic_life=False, life_loss_info=p.training, reward_clipping=False,
        use_fire_reset=False)
    return AleGames(venv, clip=p.training)


class AleGames(gym.vector.VectorWrapper):
    """What GameScore, ClipRewardToSign and the channels-last stack do, for AtariVectorEnv.

    With life_loss_info the step after a lost life is a real step of the same game (the
    rollout masks it as a reset step, as it masks EpisodicLife's no-op step); the step
    after the game ends is AtariVectorEnv's NEXT_STEP reset. A game ends at truncation, or
    at `terminated` that is not a lost life (lives fell, some left)."""

    def __init__(self, env: gym.vector.VectorEnv, clip: bool):
        super().__init__(env)
        self.clip = clip
        n = env.num_envs
        self.score, self.length = np.zeros(n), np.zeros(n, np.int64)
        self.lives = np.zeros(n, np.int64)
        self.over = np.zeros(n, bool)  # the next step is a reset step
        shape = env.single_observation_space.shape  # [k, H, W] or [k, H, W, 3]
        k, h, w = shape[:3]
        self.hwc = (h, w, k * (shape[3] if len(shape) == 4 else 1))
        self.single_observation_space = gym.spaces.Box(0, 255, self.hwc, np.uint8)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(obs, 1, 3)).reshape(len(obs), *self.hwc)

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.score[:], self.length[:], self.over[:] = 0.0, 0, False
        self.lives[:] = info["lives"]
        return self._obs(obs), info

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self.score[self.over], self.length[self.over] = 0.0, 0  # a reset step: a new game
        real = ~self.over
        self.score += np.where(real, reward, 0.0)
        self.length += real
        lives = np.asarray(info["lives"], np.int64)
        life_lost = (lives < self.lives) & (lives > 0)
        self.over = real & (truncated | (terminated & ~life_lost))
        self.lives = lives
        if self.over.any():
            info = {**info, GAME_SCORE: np.where(self.over, self.score, 0.0),
                    "_" + GAME_SCORE: self.over.copy(),
                    GAME_LENGTH: np.where(self.over, self.length, 0), "_" + GAME_LENGTH: self.over.copy()}
        if self.clip:
            reward = np.sign(reward)
        return self._obs(obs), reward, terminated, truncated, info
