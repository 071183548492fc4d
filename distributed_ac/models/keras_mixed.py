"""The mixed observation's encoder for the learner (Keras): a CNN torso on the image and
an MLP on the vector entries, their features concatenated. mixed.py is its NumPy twin."""

from __future__ import annotations

import keras
import tensorflow as tf

from distributed_ac.models import keras_cnn, keras_mlp
from distributed_ac.models.spec import IMAGE, VECTOR


class MixedEncoder(keras.layers.Layer):
    def __init__(self, kind: str, hidden_sizes: tuple[int, ...], activation: str, seed: int,
                 prefix: str, precision: str = "float32", **kwargs):
        super().__init__(**kwargs)
        self.torso = keras_cnn.make_torso(kind, f"{prefix}_{kind}", seed, precision)
        self.mlp = keras_mlp.MLPEncoder(hidden_sizes, activation, seed + 50, prefix,
                                        name=f"{prefix}_mlp")

    def call(self, x):
        # a bfloat16 torso's features join the MLP's in float32
        return tf.concat([tf.cast(self.torso(x[IMAGE]), tf.float32), self.mlp(x[VECTOR])],
                         axis=-1)

    @property
    def bundle_variables(self) -> list:
        """The torso's arrays, then the MLP's: the order mixed.MixedEncoder reads."""
        return [*self.torso.bundle_variables, *self.mlp.bundle_variables]


def tf_forward(kind: str, arrays: list, x: dict, activation: str, torso_size: int):
    """The encoder in plain TF ops over its arrays (an exported SavedModel)."""
    image = keras_cnn.tf_forward(kind, arrays[:torso_size], x[IMAGE])
    return tf.concat([image, keras_mlp.tf_forward(arrays[torso_size:], x[VECTOR], activation)],
                     axis=-1)
