"""How an env's image observation is read, decided once per run from its space and its
first observations, and said in one start-up line.

- **Categories.** A uint8 image whose values stay far below the Box's high is a grid of
  codes, not pixels: MiniGrid's `image` holds object, colour and state ids from 0 to 10
  in a Box of high 255, so the usual 1/255 scaling would feed a CNN values under 0.04.
  With `categorical_obs` auto, an image of at most CATEGORY_SIDE on each side whose
  values over PROBE_STEPS random steps all stay below CATEGORIES (with a high of at least
  4x that) is read as categories: `CategoryGrid` one-hots each cell's code per channel
  (CATEGORIES values; codes past the last read as the last) and flattens the grid into a
  0/1 vector, which the networks read with an MLP beside any other vector entries, as
  rl-zoo reads MiniGrid flat (a CNN on the same one-hot grid learned Unlock to 0.0-0.2
  where the flat MLP reached rl-zoo's 0.96: docs/notes/reading-observations.md).
- **Large frames.** An image with a side over LARGE_FRAME pixels (VizDoom's 240x320,
  CarRacing at full size, dm_control pixels at 480) is resized to AUTO_FRAME x AUTO_FRAME
  (Atari's 84, INTER_AREA), as Sample Factory and the Atari path resize, whether it is the
  whole observation or a Dict's image entry (`ResizeFrame`); `--frame-size -1` keeps the
  env's size, `--frame-size N` asks for N x N.
- **Game variables.** Vector entries beside an image (VizDoom's `gamevariables`: health,
  ammo, unbounded) are normalised by running mean and variance like any vector
  observation when normalize_obs is auto or on; the start-up line says which.

`resolved(cfg)` returns the Config with `frame_size` and `categorical_obs` settled, so
every process that makes the env (workers, evaluator, `dac evaluate`, export) reads it
alike from the run's config.yaml. No TensorFlow or Ray here: workers import this module.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from distributed_ac.core.errors import ConfigError, MissingDependency

CATEGORIES = 16  # one-hot width a channel: codes 0..15
CATEGORY_SIDE = 64  # grids larger than this are taken for pictures, whatever their values
LARGE_FRAME = 128  # a side over this is resized by default
AUTO_FRAME = 84
KEEP = -1  # frame_size: the env's own size
PROBE_STEPS = 128
UNBOUNDED = 1e6  # a Box bound past this is taken for no bound


def image_key(space) -> tuple[bool, str | int | None]:
    """(found, key) of the image an observation space holds: (True, None) for a Box image,
    (True, k) for a Dict's first image entry, (False, None) for none."""
    from distributed_ac.envs.structured import image_shape

    if image_shape(space) is not None:
        return True, None
    if isinstance(space, gym.spaces.Dict):
        for k, v in space.spaces.items():
            if image_shape(v) is not None:
                return True, k
    return False, None


def _image_space(space, key) -> gym.spaces.Box:
    return space if key is None else space[key]


def _with_image(space, key, image: gym.spaces.Box):
    if key is None:
        return image
    return gym.spaces.Dict({**space.spaces, key: image})


class _ImageWrapper(gym.ObservationWrapper):
    """Transforms the image of the observation (the Box itself, or a Dict's image entry)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        found, self.key = image_key(env.observation_space)
        if not found:
            raise ConfigError(f"{type(self).__name__} needs an image observation; the env "
                              f"gives {env.observation_space}")
        inner = _image_space(env.observation_space, self.key)
        self.observation_space = _with_image(env.observation_space, self.key,
                                             self.image_space(inner))

    def image_space(self, inner: gym.spaces.Box) -> gym.spaces.Box:
        raise NotImplementedError

    def image(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def observation(self, obs):
        if self.key is None:
            return self.image(np.asarray(obs))
        return {**obs, self.key: self.image(np.asarray(obs[self.key]))}


class CategoryGrid(_ImageWrapper):
    """[H, W, C] integer codes -> uint8 [H x W x C x CATEGORIES] of 0 and 1: entry
    ((h x W + w) x C + c) x CATEGORIES + v is 1 where cell (h, w) holds code v in channel
    c (codes past the last read as the last)."""

    def __init__(self, env: gym.Env):
        self.table = np.eye(CATEGORIES, dtype=np.uint8)
        super().__init__(env)

    def image_space(self, inner):
        self.hwc = (*inner.shape, 1)[:3]
        return gym.spaces.Box(0, 1, (int(np.prod(self.hwc)) * CATEGORIES,), np.uint8)

    def image(self, x):
        return self.table[np.minimum(x.reshape(self.hwc), CATEGORIES - 1)].reshape(-1)


class ResizeFrame(_ImageWrapper):
    """An image resized to size x size with OpenCV's INTER_AREA (Gymnasium's
    ResizeObservation does the same to a Box observation; this one also reaches into a Dict)."""

    def __init__(self, env: gym.Env, size: int):
        try:
            import cv2
        except ImportError:
            raise MissingDependency("frame_size needs OpenCV: pip install "
                                    "opencv-python-headless (or the atari extra)") from None
        self.cv2, self.size = cv2, size
        super().__init__(env)

    def image_space(self, inner):
        self.shape = (self.size, self.size, *inner.shape[2:])
        return gym.spaces.Box(0, 255, self.shape, inner.dtype)

    def image(self, x):
        # OpenCV drops a single channel's axis: the reshape puts it back
        out = self.cv2.resize(x, (self.size, self.size), interpolation=self.cv2.INTER_AREA)
        return out.reshape(self.shape)


@dataclasses.dataclass(frozen=True)
class Probe:
    """What the raw env's image is: its key, shape, dtype, Box high and the largest value
    seen over its first observations."""

    key: str | int | None
    shape: tuple[int, ...]
    dtype: str
    high: float
    seen_max: int
    space: gym.Space = dataclasses.field(compare=False)  # the raw observation space


def probe(venv: gym.vector.VectorEnv, seed: int, steps: int = PROBE_STEPS) -> Probe | None:
    """Reset a one-env vector env with `seed` and play `steps` random actions, noting the
    largest value its image takes (None when it has no image)."""
    space = venv.single_observation_space
    found, key = image_key(space)
    if not found:
        return None
    inner = _image_space(space, key)
    integer = np.issubdtype(inner.dtype, np.integer)
    obs, _ = venv.reset(seed=seed)
    seen = int(np.max(_image_space_of(obs, key))) if integer else 0
    if integer:
        venv.action_space.seed(seed)
        for _ in range(steps):
            obs, *_ = venv.step(venv.action_space.sample())
            seen = max(seen, int(np.max(_image_space_of(obs, key))))
    return Probe(key, tuple(int(d) for d in inner.shape), str(inner.dtype),
                 float(np.max(inner.high)), seen, space)


def _image_space_of(obs, key):
    return obs if key is None else obs[key]


def is_category_grid(p: Probe) -> bool:
    """categorical_obs auto: a small integer grid whose values stay far below its high."""
    return (p.dtype == "uint8" and max(p.shape[:2]) <= CATEGORY_SIDE
            and 0 < p.seen_max < CATEGORIES and p.high >= 4 * CATEGORIES)


def frame_size_for(p: Probe, frame_size: int) -> int:
    """frame_size auto (0): AUTO_FRAME for a frame with a side over LARGE_FRAME, else KEEP."""
    if frame_size:
        return frame_size
    return AUTO_FRAME if max(p.shape[:2]) > LARGE_FRAME else KEEP


def _unbounded(box: gym.spaces.Box) -> bool:
    """Bounds that say nothing of the values' scale: infinite, or float32's largest
    (VizDoom's game variables), or anything past UNBOUNDED."""
    return bool(np.any(np.abs(box.low) > UNBOUNDED) or np.any(np.abs(box.high) > UNBOUNDED))


def describe(p: Probe, frame_size: int, categorical: bool, normalized: bool,
             space) -> list[str]:
    """The start-up lines for how the image is read (none when it is read as it is), and
    for the unbounded vector entries beside it (`normalized`: whether normalize_obs
    reads them; `space`: the raw observation space)."""
    what = "the image" if p.key is None else f"'{p.key}'"
    shape = "x".join(map(str, p.shape))
    lines = []
    if categorical:
        width = int(np.prod(p.shape)) * CATEGORIES
        lines.append(f"observations: {what} {shape} holds codes 0-{p.seen_max} (of a Box up to "
                     f"{p.high:g}): read as categories, each code one-hot of {CATEGORIES}, "
                     f"flattened into {width} vector values for an MLP; "
                     "--categorical-obs False reads it as pixels")
    if frame_size > 0:
        why = (f"frames over {LARGE_FRAME} px are by default; --frame-size {KEEP} keeps "
               f"{shape}") if max(p.shape[:2]) > LARGE_FRAME else "frame_size"
        lines.append(f"observations: {what} {shape} resized to {frame_size}x{frame_size} ({why})")
    unbounded = [str(k) for k, v in getattr(space, "spaces", {}).items()
                 if k != p.key and isinstance(v, gym.spaces.Box) and _unbounded(v)]
    if p.key is not None and unbounded:
        how = ("normalised by running mean and variance (normalize_obs)" if normalized else
               "read as they are (normalize_obs false)")
        lines.append(f"observations: unbounded {', '.join(repr(k) for k in unbounded)} beside "
                     f"{what}: {how}")
    return lines
