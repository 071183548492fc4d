"""The MLP encoder and the dense heads in NumPy, over a part's arrays [W0, b0, W1, b1, ...]
(keras_mlp.py builds the same layers for the learner; a test holds the two to 1e-5).

Every layer writes into arrays kept between calls (matmul(out=), activations in place),
so a forward pass allocates nothing. Why: a [1024, 64] float32 array is 256 KB, above
glibc's mmap threshold, so a fresh one is often a new mapping whose pages fault on first
touch; `x @ W + b` into a fresh array cost ~20x the matmul itself on 1024 rows.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.core.activations import ACTIVATIONS


def mlp_forward(params: list[np.ndarray], x: np.ndarray, activation: str,
                last_linear: bool) -> np.ndarray:
    """Dense layers as the formula reads, allocating freely (the reference the tests hold
    Dense below to)."""
    n_layers = len(params) // 2
    for i in range(n_layers):
        x = x @ params[2 * i] + params[2 * i + 1]
        if i < n_layers - 1 or not last_linear:
            x = ACTIVATIONS[activation](x.copy())
    return x


def layer_buffer(buffers: list[np.ndarray], i: int, rows: int, width: int) -> np.ndarray:
    """Layer i's output array for `rows` rows, kept in `buffers` between calls: it grows,
    then stays (see the module's docstring for why)."""
    if i == len(buffers):
        buffers.append(np.empty((0, width), np.float32))
    if len(buffers[i]) < rows or buffers[i].shape[1] != width:
        buffers[i] = np.empty((rows, width), np.float32)
    return buffers[i][:rows]


class Dense:
    """A stack of dense layers over a part's arrays: every layer but the last applies
    `activation`; the last too unless `last_linear` (heads are linear, encoders are not).
    The result is a view of a buffer, valid until the next call."""

    def __init__(self, activation: str, last_linear: bool):
        self.act = ACTIVATIONS[activation]
        self.last_linear = last_linear
        self.params: list[np.ndarray] = []
        self._buffers: list[np.ndarray] = []

    def load(self, arrays: list[np.ndarray]) -> None:
        self.params = [np.asarray(a, np.float32) for a in arrays]

    @property
    def width(self) -> int:
        return self.params[-2].shape[1]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        n_layers = len(self.params) // 2
        for i in range(n_layers):
            kernel = self.params[2 * i]
            out = np.matmul(x, kernel, out=layer_buffer(self._buffers, i, len(x), kernel.shape[1]))
            out += self.params[2 * i + 1]
            x = self.act(out) if i < n_layers - 1 or not self.last_linear else out
        return x


class MLPEncoder(Dense):
    """The mlp encoder: hidden_sizes dense layers, each with the activation."""

    def __init__(self, activation: str):
        super().__init__(activation, last_linear=False)

    @classmethod
    def of(cls, spec) -> "MLPEncoder":
        return cls(spec.activation)
