"""A user's encoder held to its NumPy twin at start-up, as a shipped one is by its test.

Workers act with the twin, the learner trains the Keras layer: if the two compute
different functions the workers sample from a policy the learner never scores, and the
run drifts without an error anywhere. So before any run (or evaluation, or export) of a
user's encoder, the twin loads the layer's own arrays and both read one batch of random
observations; outputs further apart than TOLERANCE are one UsageError line naming the
part and the largest difference.

The shipped kinds are not checked here: tests/unit/test_registry.py holds each to 1e-5,
and a bfloat16 CNN (cnn_precision) would not meet a float32 tolerance.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.core.errors import UsageError
from distributed_ac.envs.space import EnvSpace
from distributed_ac.models import registry
from distributed_ac.models.spec import ModelSpec

TOLERANCE = 1e-4
"""Largest difference allowed, relative to the layer's largest output where that is
over 1: float32 sums in another order differ by ~1e-6 of it."""
ROWS = 16


def random_input(space: EnvSpace, rows: int = ROWS, seed: int = 0) -> np.ndarray:
    """`rows` observations of the space's shape and dtype, as the encoders read them:
    integers over a byte's range (images), standard normals otherwise (what normalised
    vectors look like)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(space.obs_dtype)
    shape = (rows, *space.obs_shape)
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
        return rng.integers(0, 256 if dtype != np.bool_ else 2, shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def check_encoder(spec: ModelSpec, space: EnvSpace, layer) -> None:
    """Refuse a user's encoder whose twin does not compute what its Keras `layer` (built)
    computes; nothing for a shipped one."""
    kind = registry.encoder_of(spec)
    if registry.is_shipped(kind):
        return
    name = f"torso {spec.encoder}"
    arrays = getattr(layer, "bundle_variables", None)
    if arrays is None:
        raise UsageError(f"{name}: its Keras layer {type(layer).__name__} has no "
                         "bundle_variables (the arrays its NumPy twin loads, in order)")
    x = random_input(space)
    want = np.asarray(layer(x))
    got = _twin_output(name, kind, spec, [np.asarray(v) for v in arrays], x)
    if got.shape != want.shape:
        raise UsageError(f"{name}: its NumPy twin {kind.numpy.__name__} gives "
                         f"{_shape(got)} where its Keras layer gives {_shape(want)}")
    diff = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    tolerance = TOLERANCE * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    if not diff <= tolerance:  # a NaN from either side fails too
        raise UsageError(f"{name}: its NumPy twin {kind.numpy.__name__} disagrees with its "
                         f"Keras layer on random observations: max difference {diff:.3g} "
                         f"(tolerance {tolerance:.3g})")


def _twin_output(name: str, kind, spec: ModelSpec, arrays: list, x) -> np.ndarray:
    """The twin's output over the layer's arrays; its failure is one line, as a
    disagreement is."""
    try:
        twin = kind.numpy.of(spec)
        twin.load(arrays)
        return np.array(twin(x), dtype=np.float32)  # a copy: twins may reuse a buffer
    except Exception as e:  # the user's code, whatever it raises
        why = " ".join(str(e).split())
        raise UsageError(f"{name}: its NumPy twin {kind.numpy.__name__} failed on the Keras "
                         f"layer's arrays: {type(e).__name__}: {why}") from None


def _shape(a: np.ndarray) -> str:
    return "[" + ", ".join(str(d) for d in a.shape) + "]"
