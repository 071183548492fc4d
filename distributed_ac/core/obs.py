"""Observations as they travel: one array, or (an image beside vector entries) a dict of
arrays keyed by entry, each with its own dtype. These helpers apply an array operation
to either form, so the code that stacks, joins and slices observations says it once.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def tree_map(fn: Callable, *obs):
    """fn over the arrays of one or more observations of the same form."""
    if isinstance(obs[0], dict):
        return {k: fn(*(o[k] for o in obs)) for k in obs[0]}
    return fn(*obs)


def stack(items: list):
    """np.stack of a list of observations (a rollout's steps: [T, N, ...])."""
    if isinstance(items[0], dict):
        return {k: np.stack([o[k] for o in items]) for k in items[0]}
    return np.stack(items)


def concat(items: list, axis: int = 0):
    """np.concatenate of a list of observations along `axis`."""
    if isinstance(items[0], dict):
        return {k: np.concatenate([o[k] for o in items], axis=axis) for k in items[0]}
    return np.concatenate(items, axis=axis)


def leading(obs) -> tuple[int, ...]:
    """The shape of the first array (its leading axes are every array's)."""
    return next(iter(obs.values())).shape if isinstance(obs, dict) else obs.shape
