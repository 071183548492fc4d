"""The heads on the TensorFlow side: a linear layer for logits, a Gaussian's mean or a value
(`tf_linear`, which DenseHead's call() runs over its variables and an export over its
copied arrays), and the Gaussian's state-independent log_std. heads.py is their NumPy twin;
learning/distributions.py scores their outputs."""

from __future__ import annotations

import keras
import tensorflow as tf

from distributed_ac.models.heads import MASKED_LOGIT
from distributed_ac.models.keras_mlp import dense


class DenseHead(keras.layers.Dense):
    """A linear head; orthogonal init with `gain` (0.01 keeps a new policy near uniform,
    as cleanRL does)."""

    def __init__(self, units: int, name: str, gain: float, seed: int, **kwargs):
        super().__init__(units, activation=None, name=name,
                         kernel_initializer=keras.initializers.Orthogonal(gain=gain, seed=seed),
                         **kwargs)

    def call(self, x):
        return tf_linear(self.bundle_variables, x)

    @property
    def bundle_variables(self) -> list:
        return [self.kernel, self.bias]


class LogStd(keras.layers.Layer):
    """State-independent log standard deviation of the Gaussian over u (pre-tanh)."""

    def __init__(self, dim: int, init: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.init = dim, init
        self.log_std = self.add_weight(name="log_std", shape=(dim,),
                                       initializer=keras.initializers.Constant(init))

    def call(self, mean):
        return tf.zeros_like(mean) + self.log_std

    @property
    def bundle_variables(self) -> list:
        return [self.log_std]

    def get_config(self):
        return {**super().get_config(), "dim": self.dim, "init": self.init}


def tf_linear(arrays: list, x):
    """A head over its [kernel, bias]: x @ kernel + bias."""
    return dense(x, *arrays)


def masked(logits, legal):
    """Logits with each not-allowed action's set to MASKED_LOGIT (heads.py says why not
    -inf): probability exactly 0 in a softmax, an argmax's last choice."""
    return tf.where(legal, logits, MASKED_LOGIT)
