"""The recurrent cores in NumPy, for the workers: one step of an LSTM or a GRU for every
sub-env at once, over the part's arrays [kernel, recurrent_kernel, bias]
(keras_cores.py builds the same cells for the learner; a test holds the two to 1e-5).

    LSTM (gates i, f, g, o along the last axis):
        z = x @ W + h @ U + b;  i, f, o = sigmoid(z_i, z_f, z_o);  g = tanh(z_g)
        c' = f * c + i * g;     h' = o * tanh(c')
    GRU (gates z, r, n; b is [2, 3H]: input and recurrent biases):
        a = x @ W + b[0];  u = h @ U + b[1]
        z = sigmoid(a_z + u_z);  r = sigmoid(a_r + u_r);  n = tanh(a_n + r * u_n)
        h' = z * h + (1 - z) * n

A core's state is a tuple of [B, H] arrays ((h, c) for the LSTM, (h,) for the GRU), zeroed
for a sub-env at the first step of each new episode (`starts`).
"""

from __future__ import annotations

import numpy as np

from distributed_ac.core.activations import sigmoid


def state_size(kind: str) -> int:
    """How many [B, H] arrays a core's state holds."""
    return {"lstm": 2, "gru": 1}[kind]


class RecurrentCore:
    def __init__(self, kind: str, units: int):
        self.kind, self.units = kind, units
        self.kernel = self.recurrent = self.bias = None

    @classmethod
    def of(cls, spec) -> "RecurrentCore":
        return cls(spec.core, spec.core_size)

    def load(self, arrays: list[np.ndarray]) -> None:
        self.kernel, self.recurrent, self.bias = (np.asarray(a, np.float32) for a in arrays)

    def zero_state(self, batch: int) -> tuple[np.ndarray, ...]:
        return tuple(np.zeros((batch, self.units), np.float32)
                     for _ in range(state_size(self.kind)))

    def step(self, x: np.ndarray, state: tuple, starts: np.ndarray | None = None):
        """(features [B, H], new state) for inputs x [B, F]; rows where `starts` is true
        begin from a zero state."""
        if starts is not None and starts.any():
            keep = (~starts.astype(bool))[:, None].astype(np.float32)
            state = tuple(s * keep for s in state)
        if self.kind == "lstm":
            h, c = state
            z = x @ self.kernel + h @ self.recurrent + self.bias
            # one sigmoid over all four gates (g's share unused) and views, not np.split:
            # at a worker's few rows a step costs its NumPy calls, not their arithmetic
            gates, n = sigmoid(z), self.units
            c = gates[:, n:2 * n] * c + gates[:, :n] * np.tanh(z[:, 2 * n:3 * n])
            h = gates[:, 3 * n:] * np.tanh(c)
            return h, (h, c)
        (h,) = state
        a = x @ self.kernel + self.bias[0]
        u = h @ self.recurrent + self.bias[1]
        a_z, a_r, a_n = np.split(a, 3, axis=-1)
        u_z, u_r, u_n = np.split(u, 3, axis=-1)
        z, r = sigmoid(a_z + u_z), sigmoid(a_r + u_r)
        h = z * h + (np.float32(1.0) - z) * np.tanh(a_n + r * u_n)
        return h, (h,)
