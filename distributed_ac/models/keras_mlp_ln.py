"""The mlp_ln encoder on the TensorFlow side: hidden_sizes layers of Dense, LayerNorm and
the activation (mlp_ln.py has the formula and is its NumPy twin). `tf_forward` is the one
forward pass: the Keras layer's call() runs it over its variables, an export over its
copied arrays."""

from __future__ import annotations

import keras
import tensorflow as tf

from distributed_ac.models.keras_mlp import dense
from distributed_ac.models.mlp_ln import ARRAYS_PER_LAYER, EPS


def layer_norm(y, gamma, beta):
    """Each row of y [B, U] normalised over its units, then scaled by gamma, shifted by beta."""
    mean, var = tf.nn.moments(y, axes=[-1], keepdims=True)
    return (y - mean) * tf.math.rsqrt(var + EPS) * gamma + beta


def tf_forward(arrays: list, x, activation: str):
    """The encoder over its arrays [W0, b0, gamma0, beta0, W1, ...] (variables or tensors)."""
    act = keras.activations.get(activation)
    for i in range(0, len(arrays), ARRAYS_PER_LAYER):
        kernel, bias, gamma, beta = arrays[i:i + ARRAYS_PER_LAYER]
        x = act(layer_norm(dense(x, kernel, bias), gamma, beta))
    return x


class LayerNormMLPEncoder(keras.layers.Layer):
    """Orthogonal kernels (gain sqrt(2), as the mlp encoder's), zero biases, LayerNorm's
    gamma 1 and beta 0: at initialisation each layer's output is its normalised Dense."""

    def __init__(self, hidden_sizes: tuple[int, ...], activation: str, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.hidden_sizes, self.activation, self.seed = tuple(hidden_sizes), activation, seed

    def build(self, input_shape):
        width = input_shape[-1]
        for i, units in enumerate(self.hidden_sizes):  # named attributes: checkpoints follow them
            init = keras.initializers.Orthogonal(gain=2 ** 0.5, seed=self.seed + i)
            for name, shape, initializer in ((f"kernel{i}", (width, units), init),
                                             (f"bias{i}", (units,), "zeros"),
                                             (f"gamma{i}", (units,), "ones"),
                                             (f"beta{i}", (units,), "zeros")):
                setattr(self, name, self.add_weight(name=name, shape=shape,
                                                    initializer=initializer))
            width = units

    def call(self, x):
        return tf_forward(self.bundle_variables, x, self.activation)

    @property
    def bundle_variables(self) -> list:
        """[W0, b0, gamma0, beta0, W1, ...]: the order mlp_ln.LayerNormMLPEncoder reads."""
        return [getattr(self, f"{name}{i}") for i in range(len(self.hidden_sizes))
                for name in ("kernel", "bias", "gamma", "beta")]


def from_spec(spec, prefix: str, seed: int) -> LayerNormMLPEncoder:
    """The spec's encoder (hidden_sizes, activation) for the learner."""
    return LayerNormMLPEncoder(spec.hidden_sizes, spec.activation, seed, name=f"{prefix}_mlp_ln")


def forward_of(spec):
    """What an export runs: tf_forward over copied arrays, with the spec's activation."""
    return lambda arrays, x: tf_forward(arrays, x, spec.activation)
