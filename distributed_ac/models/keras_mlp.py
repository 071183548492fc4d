"""The mlp encoder on the TensorFlow side: its forward pass in plain TF ops over its arrays
(`tf_forward`), which the Keras layer's call() runs over its variables for the learner and
an exported SavedModel runs over its copied arrays. mlp.py is its NumPy twin on the workers.

`dense` and `add_bias` are the one dense layer every TF part computes with (heads, the
CNNs' dense layer, mlp_ln): the ops Keras' own Dense ran, so the learner's graph is the
one it was and its matmul-plus-bias still fuses.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def add_bias(x, bias):
    """x + bias as Keras' layers add it (keras.ops.add): BiasAdd, which the matmul or the
    convolution before it fuses with, for a bias of more than one unit, and AddV2 for one
    (a value head). Keeping Keras' choice keeps the gradient's sums the ones they were."""
    if bias.shape[-1] == 1:
        return tf.add(x, bias)
    return tf.nn.bias_add(x, bias)


def dense(x, kernel, bias):
    """One dense layer without its activation: [B, F] @ [F, U] + [U]."""
    return add_bias(tf.matmul(x, kernel), bias)


def tf_forward(arrays: list, x, activation: str):
    """The encoder over its arrays [W0, b0, W1, b1, ...] (variables or tensors)."""
    act = keras.activations.get(activation)  # the function Keras' Dense applied
    for i in range(0, len(arrays), 2):
        x = act(dense(x, arrays[i], arrays[i + 1]))
    return x


class MLPEncoder(keras.layers.Layer):
    """hidden_sizes dense layers, each with the activation; orthogonal init, gain sqrt(2).
    Each layer's variables live in a Keras Dense (dense0, dense1, ...): the checkpoint's
    layout since 0.2; call() itself runs tf_forward."""

    def __init__(self, hidden_sizes: tuple[int, ...], activation: str, seed: int, prefix: str,
                 **kwargs):
        super().__init__(**kwargs)
        self.activation = activation
        self._names = []
        for i, h in enumerate(hidden_sizes):  # named attributes: tf.train.Checkpoint follows them
            layer = keras.layers.Dense(
                h, activation=activation, name=f"{prefix}_{i}",
                kernel_initializer=keras.initializers.Orthogonal(gain=2 ** 0.5, seed=seed + i))
            setattr(self, f"dense{i}", layer)
            self._names.append(f"dense{i}")

    @property
    def layers(self) -> list:
        return [getattr(self, name) for name in self._names]

    def build(self, input_shape):
        for layer in self.layers:
            layer.build(input_shape)
            input_shape = (*input_shape[:-1], layer.units)

    def call(self, x):
        return tf_forward(self.bundle_variables, x, self.activation)

    @property
    def bundle_variables(self) -> list:
        """[W0, b0, W1, b1, ...]: the order mlp.Dense reads."""
        return [v for layer in self.layers for v in (layer.kernel, layer.bias)]


def from_spec(spec, prefix: str, seed: int) -> MLPEncoder:
    """The spec's encoder (hidden_sizes, activation) for the learner."""
    return MLPEncoder(spec.hidden_sizes, spec.activation, seed, prefix, name=f"{prefix}_mlp")


def forward_of(spec):
    """What an export runs: tf_forward over copied arrays, with the spec's activation."""
    return lambda arrays, x: tf_forward(arrays, x, spec.activation)
