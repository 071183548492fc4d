"""The recurrent cores on the TensorFlow side: an LSTM or a GRU cell unrolled over a
rollout's T steps from the batch's stored state, zeroing each sub-env's state at the
first step of every episode, with back-propagation through time. cores.py is the
workers' NumPy twin (the equations are there).

`tf_step` is the cell in plain TF ops over the core's arrays: what the Keras layer's
step-by-step unroll runs over its variables and an export runs over its copied arrays.
The LSTM's unroll on the learner takes one fused kernel instead (fused_lstm.py, the same
cell, tested against the step-by-step form); the GRU, and the LSTM with fused=False, step
by tf_step.
"""

from __future__ import annotations

import functools

import keras
import tensorflow as tf

from distributed_ac.models import fused_lstm
from distributed_ac.models.cores import state_size

GATES = {"lstm": 4, "gru": 3}


class RecurrentCore(keras.layers.Layer):
    """kernel [F, G*H], recurrent_kernel [H, G*H], bias [G*H] (LSTM; the forget gate's
    starts at 1) or [2, G*H] (GRU: input and recurrent biases)."""

    def __init__(self, kind: str, units: int, seed: int, fused: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.kind, self.units, self.seed = kind, units, seed
        self.fused = fused and kind == "lstm"

    def build(self, input_shape):
        g, h = GATES[self.kind], self.units
        self.kernel = self.add_weight(
            name="kernel", shape=(input_shape[-1], g * h),
            initializer=keras.initializers.GlorotUniform(seed=self.seed))
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(h, g * h),
            initializer=keras.initializers.Orthogonal(seed=self.seed + 1))
        if self.kind == "lstm":  # forget-gate bias 1 (Jozefowicz et al. 2015), the rest 0
            bias = keras.initializers.Constant([0.0] * h + [1.0] * h + [0.0] * (2 * h))
            self.bias = self.add_weight(name="bias", shape=(g * h,), initializer=bias)
        else:
            self.bias = self.add_weight(name="bias", shape=(2, g * h), initializer="zeros")

    @property
    def bundle_variables(self) -> list:
        return [self.kernel, self.recurrent_kernel, self.bias]

    def zero_state(self, batch) -> tuple:
        return tuple(tf.zeros([batch, self.units]) for _ in range(state_size(self.kind)))

    def call(self, x, state, starts):
        """Unroll over time: x [T, N, F], state a tuple of [N, H], starts [T, N] (1 where
        a sub-env's episode begins). Returns (outputs [T, N, H], final state)."""
        if self.fused:
            h, c = self._fused(x, state, starts)
            return h, (h[-1], c[-1])
        if x.shape[0] is not None:  # a rollout's static T: unrolled in the graph, which
            # runs faster than a loop's per-step overhead and TensorList gradients
            outs, final, _ = self._unrolled(x, state, starts)
            return outs, final
        first = self.zero_state(tf.shape(x)[1])[0]
        outs = tf.scan(self._step, (x, starts), initializer=(first, *state))
        return outs[0], tuple(s[-1] for s in outs[1:])

    def entering_states(self, x, state, starts) -> tuple:
        """The state each step of a static-T unroll starts from, before its episode-start
        zeroing: a tuple of [T, N, H] (what a chunk of the rollout that begins at step t
        starts from)."""
        if self.fused:  # step t is entered with what step t - 1 left
            return tuple(tf.concat([s0[None], s[:-1]], 0)
                         for s0, s in zip(state, self._fused(x, state, starts)))
        return tuple(tf.stack(s) for s in zip(*self._unrolled(x, state, starts)[2]))

    def _fused(self, x, state, starts):
        h, c = fused_lstm.unroll(x, state, starts, *self.bundle_variables)
        for t in (h, c):  # gathers lose the static shape the layers after rely on
            t.set_shape([*x.shape[:2], self.units])
        return h, c

    def _step(self, carry, inputs):
        x_t, start_t = inputs
        keep = 1.0 - tf.cast(start_t, tf.float32)[:, None]
        out, new = tf_step(self.kind, self.bundle_variables, x_t,
                           tuple(s * keep for s in carry[1:]))
        return (out, *new)

    def _unrolled(self, x, state, starts):
        carry, outs, entering = (None, *state), [], []
        for t in range(x.shape[0]):
            entering.append(carry[1:])
            carry = self._step(carry, (x[t], starts[t]))
            outs.append(carry[0])
        return tf.stack(outs), tuple(carry[1:]), entering


def tf_step(kind: str, arrays, x, state):
    """One step in plain TF ops over [kernel, recurrent_kernel, bias]: (output, new state)."""
    kernel, recurrent, bias = arrays
    if kind == "lstm":
        h, c = state
        i, f, g, o = tf.split(tf.matmul(x, kernel) + tf.matmul(h, recurrent) + bias, 4, -1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
        return h, (h, c)
    (h,) = state
    a_z, a_r, a_n = tf.split(tf.matmul(x, kernel) + bias[0], 3, -1)
    u_z, u_r, u_n = tf.split(tf.matmul(h, recurrent) + bias[1], 3, -1)
    z, r = tf.sigmoid(a_z + u_z), tf.sigmoid(a_r + u_r)
    h = z * h + (1.0 - z) * tf.tanh(a_n + r * u_n)
    return h, (h,)


def from_spec(spec, prefix: str, seed: int) -> RecurrentCore:
    """The spec's core (its kind and core_size) for the learner."""
    return RecurrentCore(spec.core, spec.core_size, seed, name=f"{prefix}_{spec.core}")


def step_of(spec):
    """What an export runs: one tf_step of the spec's cell, (arrays, x, state) -> (out, state)."""
    return functools.partial(tf_step, spec.core)
