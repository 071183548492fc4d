"""Dict and Tuple observations: which entry is the action mask, and what the networks read.

- {<one Box>, "action_mask"}: the Box is the observation, whatever its rank (an image
  stays an image, uint8 stays uint8); the mask goes to the policy, not the networks.
- Any other Dict (or Tuple) of vector entries, with or without an action_mask: the
  entries, in the space's order, become one float32 vector: a Box flattened, a Discrete one-hot,
  a MultiBinary as its 0/1 entries. Observation normalisation keeps statistics per
  element, so each entry is normalised by its own.
- One image (rank-3 Box) beside vector entries: each entry travels as its own array, the
  image as the env gives it (uint8 stays uint8), each vector entry as float32 [size]
  (`as_arrays`); the networks read the image with the CNN and the vector entries,
  concatenated, with an MLP. Two images, and nested Dicts, are refused in one line.
- observe_action_mask: the mask is also one of the entries (0/1).
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from distributed_ac.core.errors import EnvError

MASK_KEY = "action_mask"


@dataclasses.dataclass(frozen=True)
class Entry:
    key: str | int  # the Dict key, or the Tuple index
    kind: str  # box, discrete or binary
    size: int  # its width in the vector
    start: int = 0  # Discrete(n, start)


@dataclasses.dataclass(frozen=True)
class Structured:
    obs_space: gym.spaces.Box  # what the networks read, as a Box
    obs_key: str | int | None = None  # the one entry read as it is (with entries: the image)
    entries: tuple[Entry, ...] = ()  # the vector entries, concatenated into one vector
    mask_size: int = 0


def split(obs_space, act_space, env: str, observe_mask: bool = False) -> Structured | None:
    """How a Dict or Tuple observation space is read (None for any other space);
    observe_mask: the action_mask is also an entry the networks read."""
    if isinstance(obs_space, gym.spaces.Tuple):
        items = list(enumerate(obs_space.spaces))
    elif isinstance(obs_space, gym.spaces.Dict):
        items = list(obs_space.spaces.items())
    else:
        return None
    mask = dict(items).get(MASK_KEY) if isinstance(obs_space, gym.spaces.Dict) else None
    mask_size = _mask_size(mask, act_space, env) if mask is not None else 0
    rest = [(k, v) for k, v in items if k != MASK_KEY or observe_mask]
    if len(rest) == 1 and isinstance(rest[0][1], gym.spaces.Box):
        return Structured(rest[0][1], obs_key=rest[0][0], mask_size=mask_size)
    images = [(k, v) for k, v in rest if _is_image(v)]
    if len(images) > 1:
        raise EnvError(f"'{env}' has image entries {[k for k, _ in images]}; one image entry "
                       "is supported (beside any number of vector entries)")
    entries = tuple(_entry(k, v, env) for k, v in rest if not _is_image(v))
    if images:
        return Structured(images[0][1], obs_key=images[0][0], entries=entries,
                          mask_size=mask_size)
    width = sum(e.size for e in entries)
    box = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)
    return Structured(box, entries=entries, mask_size=mask_size)


def _is_image(space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


def _mask_size(mask, act_space, env: str) -> int:
    if not isinstance(act_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                                  gym.spaces.MultiBinary)):
        raise EnvError(f"'{env}' has an action_mask, which needs Discrete, MultiDiscrete or "
                       f"MultiBinary actions; its action space is {act_space}")
    if not isinstance(mask, (gym.spaces.Box, gym.spaces.MultiBinary)) or len(mask.shape) != 1:
        raise EnvError(f"'{env}' has action_mask space {mask}; it must be a 1-D Box or "
                       "MultiBinary (1 = allowed)")
    return int(mask.shape[0])


def _entry(key, space, env: str) -> Entry:
    if isinstance(space, gym.spaces.Box):
        return Entry(key, "box", int(np.prod(space.shape)))
    if isinstance(space, gym.spaces.Discrete):
        return Entry(key, "discrete", int(space.n), int(space.start))
    if isinstance(space, gym.spaces.MultiBinary):
        return Entry(key, "binary", int(np.prod(space.shape)))
    raise EnvError(f"'{env}' has observation entry '{key}' of space {space}; entries may be "
                   "Box (one of them an image), Discrete or MultiBinary")


def as_float(x, e: Entry, n: int) -> np.ndarray:
    """n observations of one vector entry as float32 [n, size] (a Discrete one-hot)."""
    x = np.asarray(x)
    if e.kind == "discrete":
        return np.eye(e.size, dtype=np.float32)[x.reshape(n) - e.start]
    return x.reshape(n, e.size).astype(np.float32)


def as_vector(obs, entries: tuple[Entry, ...], n: int) -> np.ndarray:
    """n observations' entries as one float32 [n, width] vector, in the entries' order."""
    return np.concatenate([as_float(obs[e.key], e, n) for e in entries], axis=1)


def as_arrays(obs, image_key, image: tuple[tuple[int, ...], str], entries: tuple[Entry, ...],
              n: int) -> dict[str, np.ndarray]:
    """n observations of an image and vector entries as one array per entry, keyed by
    str(key): the image [n, H, W, C] in its dtype (`image`: shape and dtype), each vector
    entry float32 [n, size]."""
    shape, dtype = image
    arrays = {str(image_key): np.asarray(obs[image_key], dtype=dtype).reshape(n, *shape)}
    arrays.update((str(e.key), as_float(obs[e.key], e, n)) for e in entries)
    return arrays
