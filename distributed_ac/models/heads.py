"""The heads in NumPy: from an encoder's features to an action distribution or a value
(keras_heads.py builds them for the learner; learning/distributions.py scores them).

- categorical: logits = features @ W + b; actions by Gumbel-max, log-probs by log-softmax.
- multi_categorical (MultiDiscrete): one categorical per component over its slice of the
  logits; the components are sampled independently, their log-probs summed.
- tanh_gaussian: mean = features @ W + b and a state-independent log_std; the sample u
  is squashed by tanh and rescaled to the Box, and log pi(u) includes the Jacobian.
- value: features @ W + b, one unit.

`stored` is what a batch keeps of an action (the Discrete index, or the pre-squash u):
what the learner re-scores. `env_action` is what the env receives.
"""

from __future__ import annotations

import numpy as np

from distributed_ac.models.mlp import Dense

LOG_2 = np.float32(np.log(2.0))
HALF_LOG_2PI = np.float32(0.5 * np.log(2.0 * np.pi))
TINY = np.float32(1e-12)  # keeps the Gumbel draw's log finite when the uniform is 0
# A masked (not allowed) action's logit: its exp underflows to exactly 0 in float32 next
# to any allowed logit, so it is never sampled, and 0 * its log-prob stays 0 in the
# entropy (-inf would make that NaN)
MASKED_LOGIT = np.float32(-1e9)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.float32(0.0), x)


def log1m_tanh_sq(u, softplus=_softplus):
    """log(1 - tanh(u)^2), the tanh squash's log-Jacobian, as 2 (log 2 - u - softplus(-2u)).

    The naive form is log(0) = -inf once tanh rounds to +-1 (|u| >~ 9 in float32); this
    identity stays finite and exact for any finite u. The one place the formula is
    written: plain arithmetic and `softplus`, so the learner computes it on tensors with
    softplus=tf.math.softplus (learning/distributions.py) and the workers on arrays."""
    return np.float32(2.0) * (LOG_2 - u - softplus(np.float32(-2.0) * u))


def categorical_sample(logits: np.ndarray, rng: np.random.Generator | None, deterministic: bool,
                       noise: np.ndarray | None = None):
    """Actions [B] int32 and their log-probs [B] float32 from logits [B, K] (Gumbel-max:
    one uniform draw per logit, no per-row loop; `noise`, if given, is those uniforms)."""
    if deterministic:
        a = logits.argmax(axis=-1)
    else:
        u = noise if noise is not None else rng.random(logits.shape, dtype=np.float32)
        a = (logits - np.log(-np.log(np.maximum(u, TINY)))).argmax(axis=-1)
    # log softmax of the chosen logit only; np.clip and take_along_axis each cost more
    # than the arithmetic at one call per env step
    rows = np.arange(len(logits))
    z = logits - logits[rows, logits.argmax(axis=-1)][:, None]
    logp = z[rows, a] - np.log(np.exp(z).sum(axis=-1))
    return a.astype(np.int32), logp.astype(np.float32)


class CategoricalHead:
    mask_bounds = np.zeros(1, np.int64)  # where each component's slice of a mask starts
    noise_kind = "uniform"  # one draw per logit (Gumbel-max)

    def __init__(self, action_start: int = 0):
        self.dense = Dense("linear", last_linear=True)
        self.action_start = action_start

    @classmethod
    def of(cls, space) -> "CategoricalHead":
        return cls(space.action_start)

    def load(self, parts: dict, prefix: str) -> None:
        self.dense.load(parts[f"{prefix}.head"])

    def __call__(self, features: np.ndarray) -> np.ndarray:
        """Logits [B, K] (a reused buffer)."""
        return self.dense(features)

    # (stored [B] int32, log pi [B] float32), `noise` the uniforms [B, K] drawn beforehand
    # (a worker's per-sub-env streams), else drawn from `rng`; the function itself, not a
    # method calling it: one Python call less at every env step
    sample = staticmethod(categorical_sample)

    def env_action(self, stored: np.ndarray) -> np.ndarray:
        return stored + self.action_start


class MultiCategoricalHead(CategoricalHead):
    """MultiDiscrete: logits [B, sum(nvec)], one slice per component."""

    def __init__(self, nvec: tuple[int, ...], starts: tuple[int, ...]):
        super().__init__()
        self.bounds = np.cumsum((0, *nvec))
        self.mask_bounds = self.bounds[:-1]
        self.starts = np.asarray(starts, np.int32)

    @classmethod
    def of(cls, space) -> "MultiCategoricalHead":
        return cls(space.action_nvec, space.action_starts)

    def sample(self, logits: np.ndarray, rng: np.random.Generator | None, deterministic: bool,
               noise: np.ndarray | None = None):
        """(stored [B, components] int32, log pi [B] float32, the components' sum)."""
        stored = np.empty((len(logits), len(self.starts)), np.int32)
        logp = np.zeros(len(logits), np.float32)
        for i, (lo, hi) in enumerate(zip(self.bounds[:-1], self.bounds[1:])):
            part = None if noise is None else noise[:, lo:hi]
            stored[:, i], lp = categorical_sample(logits[:, lo:hi], rng, deterministic, part)
            logp += lp
        return stored, logp

    def env_action(self, stored: np.ndarray) -> np.ndarray:
        return stored + self.starts


class TanhGaussianHead:
    noise_kind = "normal"  # one standard normal per action dimension

    def __init__(self, low, high):
        self.dense = Dense("linear", last_linear=True)
        self.low = np.asarray(low, np.float32)
        self.half_range = (np.asarray(high, np.float32) - self.low) / 2
        self.log_half_range = np.log(self.half_range).sum(dtype=np.float32)
        self.log_std = np.zeros(0, np.float32)

    @classmethod
    def of(cls, space) -> "TanhGaussianHead":
        return cls(space.action_low, space.action_high)

    def load(self, parts: dict, prefix: str) -> None:
        self.dense.load(parts[f"{prefix}.head"])
        self.log_std = np.asarray(parts[f"{prefix}.log_std"][0], np.float32)

    def __call__(self, features: np.ndarray) -> np.ndarray:
        """The Gaussian's mean of u [B, A] (a reused buffer)."""
        return self.dense(features)

    def sample(self, mean: np.ndarray, rng: np.random.Generator | None, deterministic: bool,
               noise: np.ndarray | None = None):
        """(stored u [B, A] float32, log pi(u) [B] float32 with the squash's Jacobian).
        `noise`: standard normals [B, A] drawn beforehand, else drawn from `rng`."""
        std = np.exp(self.log_std)
        eps = (np.zeros_like(mean) if deterministic else noise if noise is not None
               else rng.standard_normal(mean.shape, dtype=np.float32))
        u = (mean + std * eps).astype(np.float32)
        gauss = -0.5 * eps * eps - self.log_std - HALF_LOG_2PI
        logp = (gauss - log1m_tanh_sq(u)).sum(axis=-1) - self.log_half_range
        return u, logp.astype(np.float32)

    def env_action(self, stored: np.ndarray) -> np.ndarray:
        """u squashed by tanh and rescaled to the Box."""
        return self.low + (np.tanh(stored) + np.float32(1.0)) * self.half_range


class ValueHead:
    def __init__(self):
        self.dense = Dense("linear", last_linear=True)

    def load(self, parts: dict, prefix: str) -> None:
        self.dense.load(parts[f"{prefix}.head"])

    def __call__(self, features: np.ndarray) -> np.ndarray:
        """V [B] (a reused buffer's column)."""
        return self.dense(features)[:, 0]
