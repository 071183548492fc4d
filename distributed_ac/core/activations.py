"""The hidden activations, in NumPy and in place: the one list of the names a Config may
give as `activation` (config/schema.py's ActivationName is built from this table's keys)
and the functions the workers compute them with (models/mlp.py, models/mlp_ln.py).

On the learner each name is Keras' function of that name (keras.activations.get); a test
holds every entry here to it within 1e-5 (tests/unit/test_model_parts.py). The table sits
this low so the config, below the models, reads the same names the models compute.
"""

from __future__ import annotations

import numpy as np


def sigmoid(x):
    """The logistic function in float32 (the recurrent cores' gates compute with it too)."""
    return np.float32(1.0) / (np.float32(1.0) + np.exp(-x))


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _into(fn):
    """An activation that writes fn(x) over x."""
    def apply(x):
        x[...] = fn(x)
        return x
    return apply


# Each activation overwrites its input with its output (see models/mlp.py for why). The
# order is the order the choices are listed in (the CLI's help, the config reference).
ACTIVATIONS = {
    "tanh": lambda x: np.tanh(x, out=x),
    "relu": lambda x: np.maximum(x, np.float32(0.0), out=x),
    "elu": _into(_elu),
    "sigmoid": _into(sigmoid),
    "silu": _into(lambda x: x * sigmoid(x)),
    "swish": _into(lambda x: x * sigmoid(x)),
    "linear": lambda x: x,
}
