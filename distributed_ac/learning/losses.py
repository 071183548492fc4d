"""Actor and critic losses as pure functions returning ``(loss, metrics)``.

Inputs are time-major ``[T, N]`` float32 tensors (any common shape works) with a 0/1
``mask`` that is 0 on the reset step following a done: those entries are excluded from
every mean, so they neither move the loss nor dilute it. Losses are scalars; metrics are
dicts of scalar tensors, safe to return from a ``tf.function``.
"""

import tensorflow as tf

# Below this variance (relative to the mean's scale) the targets are constant up to
# float32 rounding, and explained variance would divide noise by noise.
_EV_RELATIVE_EPS = 1e-12


def masked_mean(x, mask):
    """``sum(x * mask) / max(sum(mask), 1)``: the mean over unmasked entries.

    The max keeps a fully masked batch at 0 instead of NaN.
    """
    x = tf.cast(x, tf.float32)
    mask = tf.cast(mask, tf.float32)
    return tf.reduce_sum(x * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


def actor_loss(logp, advantages, entropy, mask, entropy_coef):
    """Policy-gradient loss with an entropy bonus.

    Args:
      logp: ``[T, N]`` log pi(a_t | x_t) of the taken actions, differentiable.
      advantages: ``[T, N]``; treated as constants (stop_gradient).
      entropy: ``[T, N]`` per-step policy entropy, differentiable.
      mask: ``[T, N]`` 0/1.
      entropy_coef: scalar.

    Formula::

      pg   = -masked_mean(logp * stop_gradient(advantages))
      loss = pg - entropy_coef * masked_mean(entropy)

    Returns:
      ``(loss, {"actor_loss": pg, "entropy": masked_mean(entropy)})``.
    """
    advantages = tf.stop_gradient(tf.cast(advantages, tf.float32))
    pg = -masked_mean(tf.cast(logp, tf.float32) * advantages, mask)
    mean_entropy = masked_mean(entropy, mask)
    loss = pg - tf.cast(entropy_coef, tf.float32) * mean_entropy
    return loss, {"actor_loss": pg, "entropy": mean_entropy}


def _masked_variance(x, mask):
    mean = masked_mean(x, mask)
    return masked_mean(tf.square(x - mean), mask), mean


def explained_variance(values, targets, mask):
    """``1 - Var(targets - values) / Var(targets)`` over unmasked entries.

    1 for perfect values, about 0 for predicting the mean, negative when worse. Returns
    0 when the targets are constant (zero variance), where the ratio is undefined.
    """
    values = tf.stop_gradient(tf.cast(values, tf.float32))
    targets = tf.stop_gradient(tf.cast(targets, tf.float32))
    var_targets, mean_targets = _masked_variance(targets, mask)
    var_residual, _ = _masked_variance(targets - values, mask)
    degenerate = var_targets <= _EV_RELATIVE_EPS * (1.0 + tf.square(mean_targets))
    safe_var = tf.where(degenerate, tf.ones_like(var_targets), var_targets)
    return tf.where(degenerate, tf.zeros_like(var_targets), 1.0 - var_residual / safe_var)


def critic_loss(values, targets, mask, clip=0.0):
    """Half mean squared error between V(s) and (constant) targets, each step's squared
    error optionally clipped first (RLlib's PPO's vf_clip_param).

    Args:
      values: ``[T, N]`` V(x_t) from the critic being trained, differentiable.
      targets: ``[T, N]`` returns bootstrapped from V_target; stop_gradient applied.
      mask: ``[T, N]`` 0/1.
      clip: a Python float; > 0 caps each step's squared error at it, so a step whose
        value is more than sqrt(clip) off its target adds a constant and no gradient.
        0: no clip, and the graph has no op for it.

    Formula::

      e    = (values - stop_gradient(targets)) ** 2
      loss = 0.5 * masked_mean(min(e, clip) if clip > 0 else e)

    Returns:
      ``(loss, {"critic_loss": loss, "explained_variance": ev})``.
    """
    values = tf.cast(values, tf.float32)
    targets = tf.stop_gradient(tf.cast(targets, tf.float32))
    squared = tf.square(values - targets)
    if clip > 0:  # a Python branch: at 0 the graph is the unclipped loss's, op for op
        squared = tf.minimum(squared, float(clip))
    loss = 0.5 * masked_mean(squared, mask)
    ev = explained_variance(values, targets, mask)
    return loss, {"critic_loss": loss, "explained_variance": ev}


LOG_RATIO_CAP = 20.0


def _safe_log_ratio(log_ratio, mask):
    """A log-ratio that exp keeps finite. Masked (reset) steps carry an ignored action
    whose ratio may be anything: zeroed before exp, since inf * 0 is NaN. The cap keeps
    exp finite in float32 (e^20 is far past any clip range; only the pessimistic side of
    the clipped surrogate still has a gradient there). Applying it twice changes nothing."""
    return tf.minimum(tf.cast(log_ratio, tf.float32) * tf.cast(mask, tf.float32), LOG_RATIO_CAP)


def kl_estimate(log_ratio, mask):
    """KL(mu || pi) from actions sampled under mu, with log_ratio = log pi(a) - log mu(a):
    masked_mean((r - 1) - log r), r = exp(log_ratio). Schulman's "k3" estimator: unbiased,
    and never negative (cleanRL's approx_kl). Masked steps count for nothing."""
    log_ratio = _safe_log_ratio(log_ratio, mask)
    return masked_mean(tf.exp(log_ratio) - 1.0 - log_ratio, tf.cast(mask, tf.float32))


def clipped_actor_loss(logp, old_logp, advantages, entropy, mask, clip, entropy_coef,
                       kl_coef=None):
    """PPO's clipped surrogate with an entropy bonus, and optionally a KL penalty.

    Args:
      logp: log pi_theta(a | x), differentiable.
      old_logp: log pi_old(a | x), the learner's policy before this update's epochs.
      advantages, entropy, mask: as in actor_loss.
      clip: epsilon of the ratio's clip range [1 - clip, 1 + clip].
      kl_coef: weight of the KL penalty (RLlib's PPO's, beside the clip); None: no
        penalty term in the graph at all.

    Formula::

      r    = exp(logp - old_logp)
      pg   = -masked_mean(min(r * A, clip(r, 1 - clip, 1 + clip) * A))
      kl   = masked_mean((r - 1) - log r)            (kl_estimate, differentiable)
      loss = pg - entropy_coef * masked_mean(entropy) [+ kl_coef * kl]

    Returns:
      ``(loss, {"actor_loss": pg, "entropy": ..., "clip_fraction": share of steps whose
      ratio is outside the range, "approx_kl": masked_mean((r - 1) - log r)})``.
    """
    advantages = tf.stop_gradient(tf.cast(advantages, tf.float32))
    mask = tf.cast(mask, tf.float32)
    log_ratio = _safe_log_ratio(
        tf.cast(logp, tf.float32) - tf.stop_gradient(tf.cast(old_logp, tf.float32)), mask)
    ratio = tf.exp(log_ratio)
    surrogate = tf.minimum(ratio * advantages,
                           tf.clip_by_value(ratio, 1.0 - clip, 1.0 + clip) * advantages)
    pg = -masked_mean(surrogate, mask)
    mean_entropy = masked_mean(entropy, mask)
    loss = pg - tf.cast(entropy_coef, tf.float32) * mean_entropy
    clipped = tf.cast(tf.abs(ratio - 1.0) > clip, tf.float32)
    if kl_coef is None:  # the graph without a penalty has no term for it
        approx_kl = kl_estimate(tf.stop_gradient(log_ratio), mask)
    else:
        kl = kl_estimate(log_ratio, mask)
        loss = loss + tf.cast(kl_coef, tf.float32) * kl
        approx_kl = tf.stop_gradient(kl)
    return loss, {"actor_loss": pg, "entropy": mean_entropy,
                  "clip_fraction": masked_mean(clipped, mask), "approx_kl": approx_kl}


KL_RAISE, KL_LOWER = 1.5, 0.5  # RLlib's PPO's factors


def adapted_kl_coef(kl_coef, kl, kl_target):
    """The KL penalty's weight for the next update, from this update's mean KL `kl`
    (RLlib's PPO rule): it rises when an update moved the policy too far and falls when
    it barely moved it, so the penalty holds the KL an update near kl_target.

    Formula::

      kl_coef * 1.5   if kl > 2 * kl_target
      kl_coef * 0.5   if kl < kl_target / 2
      kl_coef         otherwise
    """
    kl_coef = tf.convert_to_tensor(kl_coef, tf.float32)
    kl = tf.cast(kl, tf.float32)
    return tf.where(kl > 2.0 * kl_target, kl_coef * KL_RAISE,
                    tf.where(kl < 0.5 * kl_target, kl_coef * KL_LOWER, kl_coef))
