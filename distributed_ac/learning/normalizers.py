"""The running statistics on the learner, as TensorFlow variables checkpointed with the
networks: RunningMoments (count, mean, var of a stream; the returns' for normalize_reward)
and ObsNormalizer (the observations' for normalize_obs, and their use). The formulas and
their NumPy twins, which the workers and evaluate apply, are core/normalization.py's."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from distributed_ac.core import normalization


class RunningMoments(tf.Module):
    """count, mean and var of a stream of [B, dim] samples, as float64 tf.Variables
    (checkpointed with the networks). Starts at mean 0, var 1 and count 0: normalising
    before any data changes nothing."""

    def __init__(self, dim: int, name: str):
        super().__init__(name=name)
        f64 = tf.float64
        self.count = tf.Variable(tf.zeros([], f64), trainable=False, name="count")
        self.mean = tf.Variable(tf.zeros([dim], f64), trainable=False, name="mean")
        self.var = tf.Variable(tf.ones([dim], f64), trainable=False, name="var")

    def merge(self, n_b, mean_b, var_b) -> None:
        """Fold a batch's moments in (graph ops; a batch of count 0 changes nothing)."""
        n_b, mean_b, var_b = (tf.cast(t, tf.float64) for t in (n_b, mean_b, var_b))
        n, mean, var = normalization.chan_merge(self.count, self.mean, self.var, n_b, mean_b, var_b)
        keep = n_b > 0
        self.count.assign(tf.where(keep, n, self.count))
        self.mean.assign(tf.where(keep, mean, self.mean))
        self.var.assign(tf.where(keep, var, self.var))

    def merge_samples(self, x, keep=None) -> None:
        """Fold in the moments of x [B, dim], of its rows where `keep` [B] is true if given."""
        if keep is not None:
            x = tf.boolean_mask(x, keep)
        x = tf.cast(x, tf.float64)
        n = tf.cast(tf.shape(x)[0], tf.float64)
        mean, var = tf.nn.moments(x, axes=[0])  # NaN for no rows: merge() ignores count 0
        self.merge(n, tf.where(n > 0, mean, 0.0), tf.where(n > 0, var, 1.0))

    def inv_std(self):
        return tf.cast(tf.math.rsqrt(self.var + normalization.EPS), tf.float32)


def normalize_tf(obs, mean, inv_std, clip: float):
    """clip((obs - mean) * inv_std, -clip, clip): core.normalization.normalize_np in TF."""
    return tf.clip_by_value((obs - mean) * inv_std, -clip, clip)


class ObsNormalizer(RunningMoments):
    """The observation statistics and their use (normalization.py says how and why)."""

    def __init__(self, dim: int, clip: float):
        super().__init__(dim, name="obs_norm")
        self.clip = clip

    def __call__(self, obs):
        return normalize_tf(obs, tf.cast(self.mean, tf.float32), self.inv_std(), self.clip)

    def numpy_params(self) -> tuple[np.ndarray, np.ndarray]:
        """(mean, 1 / std) as float32, what the NumPy policy and an export apply."""
        return (self.mean.numpy().astype(np.float32),
                (1.0 / np.sqrt(self.var.numpy() + normalization.EPS)).astype(np.float32))
