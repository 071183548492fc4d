"""Observations that are not one plain Box: Dict, Tuple, and the bare integer spaces.

- A bare Discrete, MultiDiscrete or MultiBinary observation (FrozenLake's, Taxi's,
  popgym's) is one vector entry read from the whole observation (`Entry.key` None): a
  Discrete one-hot, a MultiDiscrete one-hot per component, a MultiBinary as its 0/1s.
- {<one Box>, "action_mask"}: the Box is the observation, whatever its rank (an image
  stays an image, uint8 stays uint8); the mask goes to the policy, not the networks.
- Any other Dict (or Tuple) of vector entries, with or without an action_mask: the
  entries, in the space's order, become one float32 vector (each kind as above, a Box
  flattened). Observation normalisation keeps statistics per element, so each entry is
  normalised by its own.
- One image (a Box `image_shape` reads as one) beside vector entries: each entry travels as its own array, the
  image as the env gives it (uint8 stays uint8), each vector entry as float32 [size]
  (`as_arrays`); the networks read the image with the CNN and the vector entries,
  concatenated, with an MLP. Two images, and nested Dicts, are refused in one line.
- Text entries (Gymnasium's Text, MiniGrid's mission): left out by default, since a
  policy cannot read free text without an encoder, and the run says so once at start-up
  (`Structured.dropped`); text_obs "hash" reads each as a bag of words, TEXT_BUCKETS
  counts of its lower-cased words hashed with crc32 (the same in every process, unlike
  Python's salted hash()).
- Graph and Sequence entries have no fixed width to read, and are refused in one line.
- observe_action_mask: the mask is also one of the entries (0/1).
"""

from __future__ import annotations

import dataclasses
import zlib

import gymnasium as gym
import numpy as np

from distributed_ac.core.errors import EnvError

MASK_KEY = "action_mask"
TEXT_BUCKETS = 64
MIN_IMAGE_SIDE = 3
VECTOR_SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


@dataclasses.dataclass(frozen=True)
class Entry:
    key: str | int | None  # the Dict key, or the Tuple index; None: the whole observation
    kind: str  # box, discrete, multi_discrete, binary or text
    size: int  # its width in the vector
    start: int = 0  # Discrete(n, start)
    nvec: tuple[int, ...] = ()  # multi_discrete: each component's choices, flattened
    starts: tuple[int, ...] = ()  # multi_discrete: each component's start

    @property
    def name(self) -> str:
        """What export and the learner call the entry: its key, or obs for the whole."""
        return "obs" if self.key is None else str(self.key)


@dataclasses.dataclass(frozen=True)
class Structured:
    obs_space: gym.spaces.Box  # what the networks read, as a Box
    obs_key: str | int | None = None  # the one entry read as it is (with entries: the image)
    entries: tuple[Entry, ...] = ()  # the vector entries, concatenated into one vector
    mask_size: int = 0
    dropped: tuple[str, ...] = ()  # entries left out of what the networks read, described


def split(obs_space, act_space, env: str, observe_mask: bool = False,
          text_obs: str = "drop") -> Structured | None:
    """How a Dict, Tuple or bare integer observation space is read (None for a Box);
    observe_mask: the action_mask is also an entry the networks read; text_obs: drop or
    hash (module docstring)."""
    if isinstance(obs_space, gym.spaces.Box):
        return None
    if not isinstance(obs_space, (gym.spaces.Tuple, gym.spaces.Dict)):
        entry = _entry(None, obs_space, env, text_obs)
        if entry is None:
            raise EnvError(f"'{env}' observes only text ({obs_space}); --text-obs hash reads "
                           "it as a hashed bag of words")
        return Structured(_vector_box(entry.size), entries=(entry,))
    if isinstance(obs_space, gym.spaces.Tuple):
        items = list(enumerate(obs_space.spaces))
    else:
        items = list(obs_space.spaces.items())
    mask = dict(items).get(MASK_KEY) if isinstance(obs_space, gym.spaces.Dict) else None
    mask_size = _mask_size(mask, act_space, env) if mask is not None else 0
    rest = [(k, v) for k, v in items if k != MASK_KEY or observe_mask]
    dropped = tuple(f"'{k}' ({type(v).__name__})" for k, v in rest
                    if _is_text(v) and text_obs == "drop")
    rest = [(k, v) for k, v in rest if not (_is_text(v) and text_obs == "drop")]
    if not rest:
        raise EnvError(f"'{env}' has no observation entry the networks can read once "
                       f"its text ({', '.join(dropped)}) is left out; --text-obs hash reads text")
    if len(rest) == 1 and isinstance(rest[0][1], gym.spaces.Box):
        return Structured(rest[0][1], obs_key=rest[0][0], mask_size=mask_size, dropped=dropped)
    images = [(k, v) for k, v in rest if _is_image(v)]
    if len(images) > 1:
        raise EnvError(f"'{env}' has image entries {[k for k, _ in images]}; one image entry "
                       "is supported (beside any number of vector entries)")
    entries = tuple(_entry(k, v, env, text_obs) for k, v in rest if not _is_image(v))
    if images:
        return Structured(images[0][1], obs_key=images[0][0], entries=entries,
                          mask_size=mask_size, dropped=dropped)
    return Structured(_vector_box(sum(e.size for e in entries)), entries=entries,
                      mask_size=mask_size, dropped=dropped)


def _vector_box(width: int) -> gym.spaces.Box:
    return gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)


def _is_text(space) -> bool:
    """Gymnasium's Text, or a space of strings of another package's (MiniGrid's
    MissionSpace subclasses Space, not Text)."""
    if isinstance(space, gym.spaces.Text):
        return True
    if isinstance(space, (gym.spaces.Box, *VECTOR_SPACES, gym.spaces.Dict, gym.spaces.Tuple,
                          gym.spaces.Graph, gym.spaces.Sequence)):
        return False
    try:
        return isinstance(space.sample(), str)
    except Exception:  # a space that cannot sample is no text space we can tell
        return False


def image_shape(space) -> tuple[int, int, int] | None:
    """(H, W, C) when a Box is read as an image, else None (a vector, flattened): rank 3,
    taken as (H, W, C); rank 2 of uint8 or bool, a frame or grid of one channel (a float
    matrix is more often a table of features, so it stays a vector); either at least
    MIN_IMAGE_SIDE on both sides, the smallest image a 3x3 convolution reads."""
    if not isinstance(space, gym.spaces.Box) or len(space.shape) not in (2, 3):
        return None
    if len(space.shape) == 2 and space.dtype not in (np.uint8, np.bool_):
        return None
    h, w, c = (*space.shape, 1)[:3]
    return (int(h), int(w), int(c)) if min(h, w) >= MIN_IMAGE_SIDE else None


def _is_image(space) -> bool:
    return image_shape(space) is not None


def _mask_size(mask, act_space, env: str) -> int:
    if not isinstance(act_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                                  gym.spaces.MultiBinary)):
        raise EnvError(f"'{env}' has an action_mask, which needs Discrete, MultiDiscrete or "
                       f"MultiBinary actions; its action space is {act_space}")
    if not isinstance(mask, (gym.spaces.Box, gym.spaces.MultiBinary)) or len(mask.shape) != 1:
        raise EnvError(f"'{env}' has action_mask space {mask}; it must be a 1-D Box or "
                       "MultiBinary (1 = allowed)")
    return int(mask.shape[0])


def _entry(key, space, env: str, text_obs: str = "drop") -> Entry | None:
    """One vector entry of the observation (None: text left out)."""
    if isinstance(space, gym.spaces.Box):
        return Entry(key, "box", int(np.prod(space.shape)))
    if isinstance(space, gym.spaces.Discrete):
        return Entry(key, "discrete", int(space.n), int(space.start))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in space.nvec.reshape(-1))
        starts = tuple(int(s) for s in np.broadcast_to(space.start, space.nvec.shape).reshape(-1))
        return Entry(key, "multi_discrete", sum(nvec), nvec=nvec, starts=starts)
    if isinstance(space, gym.spaces.MultiBinary):
        return Entry(key, "binary", int(np.prod(space.shape)))
    if _is_text(space):
        return Entry(key, "text", TEXT_BUCKETS) if text_obs == "hash" else None
    what = "observation space" if key is None else f"observation entry '{key}' of space"
    raise EnvError(f"'{env}' has {what} {space}; a policy reads Box, Discrete, "
                   "MultiDiscrete, MultiBinary and Text observations, in Dicts and Tuples "
                   "(one Box of them an image), not Graph, Sequence or nested Dicts")


def _one_hot(index: np.ndarray, width: int) -> np.ndarray:
    """[n, k] integer indices -> float32 [n, width] with a 1 at each (row, index)."""
    out = np.zeros((len(index), width), np.float32)
    np.put_along_axis(out, index, np.float32(1.0), axis=1)
    return out


def bag_of_words(texts, n: int) -> np.ndarray:
    """n strings -> float32 [n, TEXT_BUCKETS]: each lower-cased word's count in bucket
    crc32(word) mod TEXT_BUCKETS."""
    out = np.zeros((n, TEXT_BUCKETS), np.float32)
    for row, text in enumerate(np.asarray(texts, dtype=object).reshape(n)):
        for word in str(text).lower().split():
            out[row, zlib.crc32(word.encode()) % TEXT_BUCKETS] += 1.0
    return out


def as_float(x, e: Entry, n: int) -> np.ndarray:
    """n observations of one vector entry as float32 [n, size] (module docstring)."""
    if e.kind == "text":
        return bag_of_words(x, n)
    x = np.asarray(x)
    if e.kind == "discrete":
        return _one_hot(x.reshape(n, 1) - e.start, e.size)
    if e.kind == "multi_discrete":
        offsets = np.cumsum((0, *e.nvec[:-1])) - np.asarray(e.starts)
        return _one_hot(x.reshape(n, len(e.nvec)) + offsets, e.size)
    return x.reshape(n, e.size).astype(np.float32)


def read(obs, e: Entry):
    """Entry e of a (batched) observation: obs[key], or obs itself for key None."""
    return obs if e.key is None else obs[e.key]


def as_vector(obs, entries: tuple[Entry, ...], n: int) -> np.ndarray:
    """n observations' entries as one float32 [n, width] vector, in the entries' order."""
    if len(entries) == 1:
        return as_float(read(obs, entries[0]), entries[0], n)
    return np.concatenate([as_float(read(obs, e), e, n) for e in entries], axis=1)


def as_arrays(obs, image_key, image: tuple[tuple[int, ...], str], entries: tuple[Entry, ...],
              n: int) -> dict[str, np.ndarray]:
    """n observations of an image and vector entries as one array per entry, keyed by
    str(key): the image [n, H, W, C] in its dtype (`image`: shape and dtype), each vector
    entry float32 [n, size]."""
    shape, dtype = image
    arrays = {str(image_key): np.asarray(obs[image_key], dtype=dtype).reshape(n, *shape)}
    arrays.update((e.name, as_float(obs[e.key], e, n)) for e in entries)
    return arrays
