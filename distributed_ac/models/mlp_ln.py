"""The mlp_ln encoder in NumPy, for the workers: hidden_sizes layers of Dense, then
LayerNorm (Ba et al. 2016), then the activation, over the part's arrays
[W0, b0, gamma0, beta0, W1, ...] (keras_mlp_ln.py's bundle order; a test holds the two to
1e-5):

    y = x @ W + b;   y = (y - mean(y)) / sqrt(var(y) + EPS) * gamma + beta;   x' = act(y)

with mean and var over each row's units. Like mlp.Dense, every layer writes into arrays
kept between calls (mlp.py says why), so a forward pass allocates only per-row moments.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.core.activations import ACTIVATIONS
from distributed_ac.models.mlp import layer_buffer

# PyTorch's LayerNorm default; keras_mlp_ln.py reads this one constant too. (Keras' 1e-3
# would bias the normalised values of units whose variance is small.)
EPS = np.float32(1e-5)
ARRAYS_PER_LAYER = 4  # kernel, bias, gamma, beta


class LayerNormMLPEncoder:
    def __init__(self, activation: str):
        self.act = ACTIVATIONS[activation]
        self.layers: list[tuple[np.ndarray, ...]] = []
        self._buffers: list[np.ndarray] = []

    @classmethod
    def of(cls, spec) -> "LayerNormMLPEncoder":
        return cls(spec.activation)

    def load(self, arrays: list[np.ndarray]) -> None:
        a = [np.asarray(x, np.float32) for x in arrays]
        self.layers = [tuple(a[i:i + ARRAYS_PER_LAYER])
                       for i in range(0, len(a), ARRAYS_PER_LAYER)]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """[B, D] float32 -> [B, hidden_sizes[-1]], a view of a buffer valid until the next call."""
        for i, (kernel, bias, gamma, beta) in enumerate(self.layers):
            y = np.matmul(x, kernel, out=layer_buffer(self._buffers, i, len(x), kernel.shape[1]))
            y += bias
            y -= y.mean(axis=1, keepdims=True)
            var = np.einsum("ij,ij->i", y, y) / np.float32(y.shape[1])  # no [B, U] temporary
            y *= (np.float32(1.0) / np.sqrt(var + EPS))[:, None]
            y *= gamma
            y += beta
            x = self.act(y)
        return x
