"""A user's own encoder, as docs/guide/own-networks.md writes one: the workers' half, in
NumPy (no TensorFlow here: Ray workers import this module). own_torso_tf.py is the
learner's half. `--torso own_torso:gated` names it; `gated_wrong` is a twin that computes
something else, which start-up refuses (tests/e2e/test_own_networks.py).

Each import appends this process's pid to $DAC_TEST_PKG_LOG (as registers_on_import.py
does), so a test can tell that a Ray worker imported it."""

import os

import numpy as np

from distributed_ac.models.registry import register_encoder


class GatedTwin:
    """tanh(x W + b) * sigmoid(x Wg + bg), over the arrays [W, b, Wg, bg]."""

    @classmethod
    def of(cls, spec):
        return cls()

    def load(self, arrays):
        self.w, self.b, self.wg, self.bg = (np.asarray(a, np.float32) for a in arrays)

    def __call__(self, x):
        gate = 1.0 / (1.0 + np.exp(-(x @ self.wg + self.bg)))
        return np.tanh(x @ self.w + self.b) * gate


class WrongTwin(GatedTwin):
    """A twin whose gate is not the Keras layer's (ReLU where it has a sigmoid)."""

    def __call__(self, x):
        return np.tanh(x @ self.w + self.b) * np.maximum(x @ self.wg + self.bg, 0.0)


gated = register_encoder("gated", GatedTwin, keras="own_torso_tf")
gated_wrong = register_encoder("gated_wrong", WrongTwin, keras="own_torso_tf")

if os.environ.get("DAC_TEST_PKG_LOG"):
    with open(os.environ["DAC_TEST_PKG_LOG"], "a") as f:  # one short line: whole lines
        f.write(f"{os.getpid()} own_torso\n")
