"""The mlp encoder for the learner (Keras), and its forward pass in plain TF ops over its
arrays for an exported SavedModel. mlp.py is its NumPy twin on the workers."""

from __future__ import annotations

import keras
import tensorflow as tf


class MLPEncoder(keras.layers.Layer):
    """hidden_sizes Dense layers, each with the activation; orthogonal init, gain sqrt(2)."""

    def __init__(self, hidden_sizes: tuple[int, ...], activation: str, seed: int, prefix: str,
                 **kwargs):
        super().__init__(**kwargs)
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

    def call(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    @property
    def bundle_variables(self) -> list:
        """[W0, b0, W1, b1, ...]: the order mlp.Dense reads."""
        return [v for layer in self.layers for v in (layer.kernel, layer.bias)]


def tf_forward(arrays: list, x, activation: str):
    """The encoder in plain TF ops over its arrays (variables or tensors)."""
    act = keras.activations.get(activation)
    for i in range(0, len(arrays), 2):
        x = act(tf.matmul(x, arrays[i]) + arrays[i + 1])
    return x
