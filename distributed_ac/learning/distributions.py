"""Action distributions on the learner side (TensorFlow).

- Categorical on raw logits ``[..., K]`` (discrete heads use activation=None).
- Tanh-squashed diagonal Gaussian rescaled to a Box ``[low, high]``. The stored action
  is the PRE-squash sample ``u``; the env action is
  ``a = low + (tanh(u) + 1) / 2 * (high - low)``. Storing ``u`` avoids ``atanh`` of an
  action that float32 rounding may have pushed onto the Box boundary (infinite ``u``).

The rollout worker keeps its own NumPy twin of the sampling and log-prob code
(models/heads.py); these functions are the learner's differentiable versions. What both
write alike, the tanh Jacobian and log sqrt(2 pi), is written there once and read here.
"""

import math

import tensorflow as tf

from distributed_ac.models import heads

_HALF_LOG_2PI = heads.HALF_LOG_2PI
_HALF_LOG_2PI_E = 0.5 * math.log(2.0 * math.pi * math.e)


def categorical_log_prob(logits, actions):
    """log softmax(logits)[actions].

    Args:
      logits: ``[..., K]`` float, raw (unnormalized) scores.
      actions: ``[...]`` integer action indices in ``[0, K)``.

    Returns:
      ``[...]`` float32 log-probabilities.
    """
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    actions = tf.cast(actions, tf.int32)
    rank = actions.shape.rank
    return tf.gather(log_probs, actions, axis=rank, batch_dims=rank)


def categorical_entropy(logits):
    """``-sum_k p_k log p_k`` over the last axis of ``logits [..., K]``; returns ``[...]``."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    return -tf.reduce_sum(tf.exp(log_probs) * log_probs, axis=-1)


def multi_categorical_log_prob(logits, actions, nvec):
    """``sum_i log softmax(logits_i)[actions_i]`` over a MultiDiscrete action's components.

    Args:
      logits: ``[B, sum(nvec)]``, component i's logits in its slice.
      actions: ``[B, len(nvec)]`` integer choices, each in ``[0, nvec[i])``.
    Returns:
      ``[B]`` float32.
    """
    parts = tf.split(logits, list(nvec), axis=-1)
    choices = tf.unstack(tf.cast(actions, tf.int32), num=len(nvec), axis=-1)
    return tf.add_n([categorical_log_prob(z, a) for z, a in zip(parts, choices)])


def multi_categorical_entropy(logits, nvec):
    """The components are independent, so the entropy is the sum of theirs: ``[B]``."""
    return tf.add_n([categorical_entropy(z) for z in tf.split(logits, list(nvec), axis=-1)])


def log1m_tanh_sq(u):
    """``log(1 - tanh(u)^2)`` of a tensor: models/heads.py's formula (written there once,
    with why it is stable), over float32 tensors."""
    return heads.log1m_tanh_sq(tf.cast(u, tf.float32), tf.math.softplus)


def squash_to_box(u, low, high):
    """Env action ``low + (tanh(u) + 1) / 2 * (high - low)``; broadcasts over ``[..., A]``."""
    low = tf.cast(low, tf.float32)
    high = tf.cast(high, tf.float32)
    return low + (tf.tanh(tf.cast(u, tf.float32)) + 1.0) * 0.5 * (high - low)


def tanh_gaussian_log_prob(u, mean, log_std, half_range):
    """Log-density of the env action ``a = squash_to_box(u, low, high)``.

    Args:
      u: ``[..., A]`` pre-squash samples (the stored actions; constants).
      mean, log_std: ``[..., A]`` Gaussian parameters from the actor.
      half_range: ``[A]`` (or broadcastable), ``(high - low) / 2`` per action dim.

    Formula (change of variables, da/du = half_range * (1 - tanh(u)^2))::

      log p(a) = sum_A [ log Normal(u; mean, exp(log_std))
                         - log(1 - tanh(u)^2) - log(half_range) ]

    Returns:
      ``[...]`` float32, summed over the last axis.
    """
    u = tf.cast(u, tf.float32)
    mean = tf.cast(mean, tf.float32)
    log_std = tf.cast(log_std, tf.float32)
    half_range = tf.cast(half_range, tf.float32)
    z = (u - mean) * tf.exp(-log_std)
    normal_logp = -0.5 * tf.square(z) - log_std - _HALF_LOG_2PI
    jacobian = log1m_tanh_sq(u) + tf.math.log(half_range)
    return tf.reduce_sum(normal_logp - jacobian, axis=-1)


def tanh_gaussian_entropy(mean, log_std, u, half_range):
    """Reparameterised single-sample estimate of the entropy of the squashed Gaussian.

    The entropy of ``a`` has no closed form, but by change of variables
    ``H(a) = H(u) + E_eps[log |da/du|]`` at ``u = mean + std * eps``, eps ~ N(0, 1).
    ``H(u)`` is the Gaussian's closed form. The expectation is estimated at the given
    samples ``u`` (the rollout's stored actions) through their noise
    ``eps = stop_gradient((u - mean) / std)``: ``mean + std * eps`` equals ``u`` in
    value, and carries the gradient of the Jacobian term to mean and log_std::

      H ~= sum_A [ 0.5 * log(2 pi e) + log_std ]
           + sum_A [ log(1 - tanh(mean + std * eps)^2) + log(half_range) ]

    Why not the pre-squash Gaussian entropy (cleanRL, SB3)? Its gradient in log_std is
    always +1, so an entropy bonus pushes the std up without bound and the actions
    pile up at the edges of the Box, where the true entropy of ``a`` falls. This
    estimate's expected gradient is the true entropy's (a test checks it against
    Gauss-Hermite quadrature), so the bonus stops where the entropy of ``a`` peaks.

    Args:
      mean, log_std, u: ``[..., A]``. half_range: ``[A]`` (or broadcastable).

    Returns:
      ``[...]`` float32.
    """
    mean = tf.cast(mean, tf.float32)
    log_std = tf.cast(log_std, tf.float32)
    half_range = tf.cast(half_range, tf.float32)
    std = tf.exp(log_std)
    eps = tf.stop_gradient((tf.cast(u, tf.float32) - mean) / std)
    u_rep = mean + std * eps
    gaussian = tf.reduce_sum(_HALF_LOG_2PI_E + log_std, axis=-1)
    jacobian = tf.reduce_sum(log1m_tanh_sq(u_rep) + tf.math.log(half_range), axis=-1)
    return gaussian + jacobian
