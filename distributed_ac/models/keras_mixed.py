"""The mixed observation's encoder on the TensorFlow side: a CNN torso on the image and an
MLP on the vector entries, their features concatenated (`tf_forward`, which the Keras
layer's call() runs over its variables and an export over its copied arrays). mixed.py is
its NumPy twin; its arrays are the torso's (cnn.bundle_size of them), then the MLP's."""

from __future__ import annotations

import keras
import tensorflow as tf

from distributed_ac.models import keras_cnn, keras_mlp
from distributed_ac.models.cnn import bundle_size
from distributed_ac.models.mixed import IMAGE, VECTOR


def tf_forward(kind: str, arrays: list, x: dict, activation: str, torso_size: int,
               dtype=tf.float32):
    """x: {IMAGE: [B, H, W, C], VECTOR: [B, D]} -> [B, torso features + MLP features]; the
    torso computes in `dtype` and its features join the MLP's in float32."""
    image = keras_cnn.tf_forward(kind, arrays[:torso_size], x[IMAGE], dtype)
    vector = keras_mlp.tf_forward(arrays[torso_size:], x[VECTOR], activation)
    return tf.concat([tf.cast(image, tf.float32), vector], axis=-1)


class MixedEncoder(keras.layers.Layer):
    def __init__(self, kind: str, hidden_sizes: tuple[int, ...], activation: str, seed: int,
                 prefix: str, precision: str = "float32", **kwargs):
        super().__init__(**kwargs)
        self.kind, self.activation = kind, activation
        self.torso = keras_cnn.make_torso(kind, f"{prefix}_{kind}", seed, precision)
        self.mlp = keras_mlp.MLPEncoder(hidden_sizes, activation, seed + 50, prefix,
                                        name=f"{prefix}_mlp")

    def build(self, input_shape):
        self.torso.build(input_shape[IMAGE])
        self.mlp.build(input_shape[VECTOR])

    def call(self, x):
        return tf_forward(self.kind, self.bundle_variables, x, self.activation,
                          bundle_size(self.kind), self.torso.compute_dtype)

    @property
    def bundle_variables(self) -> list:
        """The torso's arrays, then the MLP's: the order mixed.MixedEncoder reads."""
        return [*self.torso.bundle_variables, *self.mlp.bundle_variables]


def from_spec(spec, prefix: str, seed: int) -> MixedEncoder:
    """The spec's torso (`encoder`) beside an MLP of its hidden_sizes, for the learner."""
    return MixedEncoder(spec.encoder, spec.hidden_sizes, spec.activation, seed, prefix,
                        spec.cnn_precision, name=f"{prefix}_mixed")


def forward_of(spec):
    """What an export runs: tf_forward over copied arrays, in float32."""
    size = bundle_size(spec.encoder)
    return lambda arrays, x: tf_forward(spec.encoder, arrays, x, spec.activation, size)
