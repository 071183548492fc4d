"""Observations in the learner's graph: the step's input signature, and the raw batch's
observations as the encoders read them (networks.network_input).

A batch's observations are one [T, N, ...] array, or for an image beside vector entries
a dict of them, one per entry (EnvSpace.obs_arrays); tf.nest carries either form through
the reshapes and gathers of an update.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from distributed_ac.envs.space import EnvSpace
from distributed_ac.models.spec import IMAGE, VECTOR


def obs_signature(space: EnvSpace, T: int):
    """[T, N, ...] observations as the step takes them (uint8 images arrive as bytes;
    the encoder casts them inside the graph)."""
    if space.mixed:
        return {k: tf.TensorSpec([T, None, *shape], tf.as_dtype(dtype))
                for k, (shape, dtype) in space.obs_arrays().items()}
    return tf.TensorSpec([T, None, *space.obs_shape], tf.as_dtype(space.obs_dtype))


def flat_rows(obs):
    """[T, N, ...] -> [T * N, ...], for each array."""
    return tf.nest.map_structure(lambda o: tf.reshape(o, [-1, *o.shape[2:]]), obs)


def as_steps(obs, shape):
    """[T * N, ...] -> [T, N, ...] (shape: [T, N]), for each array."""
    return tf.nest.map_structure(lambda o: tf.reshape(o, [shape[0], shape[1], *o.shape[1:]]),
                                 obs)


def vector_of(space: EnvSpace, raw_obs):
    """What observation normalisation reads: the observations, or a mixed one's vector
    entries concatenated in the space's order."""
    if not space.mixed:
        return raw_obs
    return tf.concat([raw_obs[e.name] for e in space.obs_entries], axis=-1)


def network_obs(space: EnvSpace, obs_norm, raw_obs):
    """Raw observations [B, ...] as the encoders read them: normalised by obs_norm (None:
    as they are), a mixed one as {IMAGE: the image, VECTOR: the vector entries}."""
    vector = vector_of(space, raw_obs)
    vector = obs_norm(vector) if obs_norm is not None else vector
    if not space.mixed:
        return vector
    return {IMAGE: raw_obs[str(space.obs_key)], VECTOR: vector}


def zero_obs(space: EnvSpace, n: int, T: int):
    """[T, n] observations of zeros in a batch's form, for synthetic batches."""
    if space.mixed:
        return {k: np.zeros((T, n, *shape), dtype)
                for k, (shape, dtype) in space.obs_arrays().items()}
    return np.zeros((T, n, *space.obs_shape), space.obs_dtype)
