"""The worker's copy of the policy: a NumPy forward pass over a Weights bundle.

Rollout workers must stay light (no TensorFlow: ~500 MB and ~2 s per process), so the
MLPs that networks.py builds are re-evaluated here with NumPy from the broadcast
kernels and biases; a CNN torso (image observations) by numpy_cnn.py, before the head. A test checks this forward pass against the Keras models to 1e-5.
An activation with no NumPy twin falls back to Keras' own function, which imports
TensorFlow in that worker; `Policy.uses_tensorflow` says so and the driver logs it.
"""

from __future__ import annotations

import logging

import numpy as np

from distributed_ac.core.batch import Weights
from distributed_ac.envs.vector import EnvSpace
from distributed_ac.models.cnn import NumpyTorso, bundle_size

log = logging.getLogger(__name__)

VALUE_BLOCK = 1024  # rows per block of Policy.value
LOG_2 = np.float32(np.log(2.0))
HALF_LOG_2PI = np.float32(0.5 * np.log(2.0 * np.pi))
TINY = np.float32(1e-12)  # keeps the Gumbel draw's log finite when the uniform is 0


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.float32(0.0), x)


NUMPY_ACTIVATIONS = {
    "linear": lambda x: x,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, np.float32(0.0)),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "sigmoid": lambda x: np.float32(1.0) / (np.float32(1.0) + np.exp(-x)),
    "silu": lambda x: x / (np.float32(1.0) + np.exp(-x)),
    "swish": lambda x: x / (np.float32(1.0) + np.exp(-x)),
}


def activation_fn(name: str):
    """NumPy activation, or Keras' (importing TensorFlow) when NumPy has no twin."""
    if name in NUMPY_ACTIVATIONS:
        return NUMPY_ACTIVATIONS[name], False
    from distributed_ac.learning.tf_runtime import load_tensorflow

    load_tensorflow()  # deliberate: only workers whose activation NumPy lacks pay for it
    import keras

    fn = keras.activations.get(name)
    return (lambda x: np.asarray(fn(x), dtype=np.float32)), True


def mlp_forward(params: list[np.ndarray], x: np.ndarray, act) -> np.ndarray:
    """Dense layers [W0, b0, W1, b1, ...]: hidden layers use `act`, the last is linear.
    The formula as written; MLP below computes the same without allocating (tests
    compare the two)."""
    n_layers = len(params) // 2
    for i in range(n_layers):
        x = x @ params[2 * i] + params[2 * i + 1]
        if i < n_layers - 1:
            x = act(x)
    return x


# Activations that can overwrite their input. np.tanh(x, out=x) and friends skip the
# allocation of a fresh [B, width] array.
IN_PLACE = {
    "linear": lambda x: x,
    "tanh": lambda x: np.tanh(x, out=x),
    "relu": lambda x: np.maximum(x, np.float32(0.0), out=x),
}


def _overwriting(act):
    def act_into(x: np.ndarray) -> np.ndarray:
        x[...] = act(x)
        return x

    return act_into


class MLP:
    """mlp_forward into arrays kept between calls: each layer's output is written with
    matmul(out=) and updated in place, so a call allocates nothing.

    Why: a [1024, 64] float32 array is 256 KB, above glibc's mmap threshold, so a fresh
    one is often a new mapping whose 64 pages fault on first touch. On the 2-core
    development machine that made `x @ W + b` 140 us where the matmul itself takes 7,
    and a 1024-row 4-64-64-2 forward ~290 us against ~170 us in place (at 32 rows both
    take ~12 us; RESULTS.md, "Pipeline efficiency"). The result is a view of a buffer,
    valid until the next call.
    """

    def __init__(self, act_name: str, act):
        self.params: list[np.ndarray] = []  # set on each Weights bundle; buffers stay
        self.act = IN_PLACE.get(act_name) or _overwriting(act)
        self._buffers: list[np.ndarray] = []

    def _buffer(self, i: int, rows: int) -> np.ndarray:
        width = self.params[2 * i].shape[1]
        if i == len(self._buffers):
            self._buffers.append(np.empty((0, width), np.float32))
        if len(self._buffers[i]) < rows:  # grows to the largest batch seen, then stays
            self._buffers[i] = np.empty((rows, width), np.float32)
        return self._buffers[i][:rows]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        n_layers = len(self.params) // 2
        for i in range(n_layers):
            out = np.matmul(x, self.params[2 * i], out=self._buffer(i, len(x)))
            out += self.params[2 * i + 1]
            x = self.act(out) if i < n_layers - 1 else out
        return x


def log1m_tanh_sq(u: np.ndarray) -> np.ndarray:
    """log(1 - tanh(u)^2), stable for large |u| (the tanh Jacobian)."""
    return np.float32(2.0) * (LOG_2 - u - _softplus(np.float32(-2.0) * u))


class Policy:
    """Samples actions and computes V_target values from the newest Weights bundle."""

    def __init__(self, space: EnvSpace, activation: str):
        self.space = space
        self.act_fn, self.uses_tensorflow = activation_fn(activation)
        if self.uses_tensorflow:
            log.warning("activation '%s' has no NumPy twin: this worker imports TensorFlow "
                        "(~500 MB resident) for its forward pass", activation)
        self.low = np.asarray(space.action_low, np.float32)
        self.half_range = space.half_range
        self.log_half_range = np.log(self.half_range).sum(dtype=np.float32) if not space.discrete else 0.0
        self.weights: Weights | None = None
        self._obs_norm = None
        self._actor = MLP(activation, self.act_fn)
        self._target = MLP(activation, self.act_fn)
        self._actor_torso = self._target_torso = None  # NumpyTorso with a CNN torso

    def load(self, weights: Weights) -> None:
        if self.weights is None or weights.version != self.weights.version \
                or weights.target_version != self.weights.target_version:
            self.weights = weights
            layers, log_std = weights.actor_parts(self.space.discrete)
            self._actor_layers = [np.asarray(p, np.float32) for p in layers]
            self._log_std = None if log_std is None else np.asarray(log_std, np.float32)
            self._target_layers = [np.asarray(p, np.float32) for p in weights.v_target]
            self._actor.params, self._target.params = self._actor_layers, self._target_layers
            self._obs_norm = weights.obs_norm
            self._actor_torso = self._target_torso = None
            if weights.torso != "mlp":  # the torso's arrays come first, the head's after
                n = bundle_size(weights.torso)
                self._actor_torso = NumpyTorso(weights.torso, self._actor_layers[:n])
                self._target_torso = NumpyTorso(weights.torso, self._target_layers[:n])
                self._actor.params, self._target.params = (self._actor_layers[n:],
                                                           self._target_layers[n:])

    def _actor_out(self, obs: np.ndarray) -> np.ndarray:
        x = self._input(obs)
        return self._actor(x if self._actor_torso is None else self._actor_torso(x))

    def _target_out(self, obs: np.ndarray) -> np.ndarray:
        return self._target(obs if self._target_torso is None else self._target_torso(obs))

    def _input(self, obs: np.ndarray) -> np.ndarray:
        """Observations as both networks take them (normalised with normalize_obs)."""
        return obs if self._obs_norm is None else self._obs_norm(obs)

    def value(self, obs: np.ndarray) -> np.ndarray:
        """V_target(obs) for obs [B, *obs_shape] -> [B], in blocks of VALUE_BLOCK rows.

        A block's hidden activations stay in cache; one pass over a whole 1024-env x
        16-step batch (17k rows) ran at about half the speed.
        """
        out = np.empty(len(obs), np.float32)
        obs = self._input(obs)
        for i in range(0, len(obs), VALUE_BLOCK):
            out[i:i + VALUE_BLOCK] = self._target_out(obs[i:i + VALUE_BLOCK])[:, 0]
        return out

    def forward(self, obs: np.ndarray) -> np.ndarray:
        """Actor output: logits [B, K] (Discrete) or Gaussian mean of u [B, A] (Box).
        A fresh array; act() reads the reused buffer directly."""
        return self._actor_out(obs).copy()

    def act(self, obs: np.ndarray, rng: np.random.Generator, deterministic: bool = False):
        """Sample actions for obs [B, *obs_shape] (EnvSpace.as_batch).

        Returns (stored, env_action, logp): `stored` is what the learner re-scores (the
        Discrete index, or the pre-squash Gaussian sample u for Box), `env_action` is what
        the env receives, `logp` is log pi(stored | obs) including the tanh Jacobian.
        """
        out = self._actor_out(obs)  # a reused buffer: both samplers only read it
        if self.space.discrete:
            return self._act_discrete(out, rng, deterministic)
        return self._act_box(out, rng, deterministic)

    def _act_discrete(self, logits, rng, deterministic):
        if deterministic:
            a = logits.argmax(axis=-1)
        else:  # Gumbel-max: one uniform draw per logit, no per-row loop
            u = rng.random(logits.shape, dtype=np.float32)
            a = (logits - np.log(-np.log(np.maximum(u, TINY)))).argmax(axis=-1)
        # log softmax of the chosen logit only; this runs once per env step, where
        # np.clip and np.take_along_axis each cost more than the arithmetic (~5-9 us),
        # and max along a short last axis costs ~49 us for 1024 x 2 where argmax and a
        # gather of the same maxima cost ~12 us.
        rows = np.arange(len(logits))
        z = logits - logits[rows, logits.argmax(axis=-1)][:, None]
        logp = z[rows, a] - np.log(np.exp(z).sum(axis=-1))
        return a.astype(np.int32), self.env_action(a), logp.astype(np.float32)

    def _act_box(self, mean, rng, deterministic):
        std = np.exp(self._log_std)
        eps = np.zeros_like(mean) if deterministic else rng.standard_normal(mean.shape, dtype=np.float32)
        u = (mean + std * eps).astype(np.float32)
        gauss = -0.5 * eps * eps - self._log_std - HALF_LOG_2PI
        logp = (gauss - log1m_tanh_sq(u)).sum(axis=-1) - self.log_half_range
        return u, self.env_action(u), logp.astype(np.float32)

    def env_action(self, stored: np.ndarray) -> np.ndarray:
        """What the env receives for a stored action: the Discrete index shifted to the
        space's start, or u squashed by tanh and rescaled to the Box."""
        if self.space.discrete:
            return stored + self.space.action_start
        return self.low + (np.tanh(stored) + np.float32(1.0)) * self.half_range
