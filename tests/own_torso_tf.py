"""The learner's half of tests/own_torso.py's encoder: its plain-TF forward over the
arrays [W, b, Wg, bg], the Keras layer whose call() runs it over its variables, and what
the package asks of the module: from_spec (the layer) and forward_of (for dac export)."""

import keras
import tensorflow as tf


def forward(arrays, x):
    w, b, wg, bg = arrays
    return tf.tanh(tf.matmul(x, w) + b) * tf.sigmoid(tf.matmul(x, wg) + bg)


class Gated(keras.layers.Layer):
    def __init__(self, units: int, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.units, self.seed = units, seed

    def build(self, input_shape):
        def weight(name, shape, init):
            return self.add_weight(name=name, shape=shape, initializer=init)

        features = input_shape[-1]
        self.w = weight("w", (features, self.units),
                        keras.initializers.Orthogonal(gain=2 ** 0.5, seed=self.seed))
        self.b = weight("b", (self.units,), "zeros")
        self.wg = weight("wg", (features, self.units),
                         keras.initializers.Orthogonal(gain=1.0, seed=self.seed + 1))
        self.bg = weight("bg", (self.units,), "zeros")

    def call(self, x):
        return forward(self.bundle_variables, x)

    @property
    def bundle_variables(self):
        """The order the NumPy twin's load() reads."""
        return [self.w, self.b, self.wg, self.bg]


def from_spec(spec, prefix, seed):
    return Gated(spec.hidden_sizes[-1], seed, name=f"{prefix}_gated")


def forward_of(spec):
    return forward
