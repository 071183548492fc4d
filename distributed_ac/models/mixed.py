"""The encoder of a mixed observation (an image beside vector entries) in NumPy: the CNN
torso on the image, the MLP on the vector entries (concatenated, normalised), and their
features side by side. keras_mixed.py is its Keras twin; its part's arrays are the
torso's (cnn.bundle_size of them) followed by the MLP's."""

from __future__ import annotations

import numpy as np

from distributed_ac.models.cnn import CNNEncoder, bundle_size
from distributed_ac.models.mlp import MLPEncoder

# a mixed observation as the encoders read it: the image, and the vector entries
# concatenated (and normalised with normalize_obs); spec.py names them for everyone
IMAGE, VECTOR = "image", "vector"


class MixedEncoder:
    def __init__(self, kind: str, activation: str):
        self.kind = kind
        self.cnn, self.mlp = CNNEncoder(kind), MLPEncoder(activation)

    @classmethod
    def of(cls, spec) -> "MixedEncoder":
        """The spec's torso (`encoder`) on the image, an MLP on the vector entries."""
        return cls(spec.encoder, spec.activation)

    def load(self, arrays: list[np.ndarray]) -> None:
        k = bundle_size(self.kind)
        self.cnn.load(arrays[:k])
        self.mlp.load(arrays[k:])

    def __call__(self, x: dict) -> np.ndarray:
        """x: {IMAGE: [B, H, W, C], VECTOR: [B, D] float32} -> features [B, F] (fresh)."""
        return np.concatenate([self.cnn(x[IMAGE]), self.mlp(x[VECTOR])], axis=1)
