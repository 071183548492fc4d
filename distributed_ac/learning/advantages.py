"""Return and advantage estimators: GAE / n-step targets and V-trace.

Pure TensorFlow functions, usable eagerly and inside ``@tf.function``. All inputs are
time-major: ``[T, N]`` for T steps of N sub-environments, except ``values`` which is
``[T + 1, N]``: V_target at obs_0 .. obs_T, so ``values[t + 1]`` is the value of the
observation returned by step t (the real final observation when step t ended an episode,
under Gymnasium 1.x NEXT_STEP autoreset).

Flags are float32 0/1 arrays, never merged into one ``done``:

- ``terminated[t]``: step t reached a terminal state; nothing is bootstrapped after it.
- ``truncated[t]``: step t hit a time limit; bootstrap from ``values[t + 1]``.
- ``mask[t] = 0``: step t is the reset step that follows a done (action ignored). Its
  outputs are exactly 0 and it never feeds the recursion of an earlier step.

The backward recursion carries from t + 1 into t only when step t is neither terminated
nor truncated.
"""

import tensorflow as tf


def _as_f32(*xs):
    return [tf.cast(x, tf.float32) for x in xs]


def _check_shapes(rewards, values):
    """Fail at trace time, with the shapes, when values is not one row longer."""
    t_r, t_v = rewards.shape[0], values.shape[0]
    if t_r is not None and t_v is not None and t_v != t_r + 1:
        raise ValueError(
            f"values must have shape [T + 1, N]; got rewards {rewards.shape}, "
            f"values {values.shape}"
        )


def _backward_recursion(deltas, discounts, mask):
    """acc_t = mask_t * (deltas_t + discounts_t * acc_{t+1}), acc_T = 0.

    Multiplying by mask inside the recursion (not only on the output) keeps a reset
    step from reaching earlier steps even if a caller's flags were inconsistent; with
    consistent flags the step before a reset step is done, so this changes nothing.
    """

    def step(acc_next, elems):
        delta, discount, m = elems
        return m * (delta + discount * acc_next)

    return tf.scan(
        step,
        (deltas, discounts, mask),
        initializer=tf.zeros_like(deltas[0]),
        reverse=True,
    )


def gae(rewards, values, terminated, truncated, mask, gamma, lam):
    """Generalized advantage estimation with separate termination and truncation.

    Args:
      rewards, terminated, truncated, mask: ``[T, N]`` float32 (flags are 0/1).
      values: ``[T + 1, N]`` float32, V_target at obs_0 .. obs_T.
      gamma, lam: scalars (Python floats or float32 tensors).

    Formula::

      delta_t = r_t + gamma * (1 - term_t) * values[t+1] - values[t]
      A_t     = delta_t + gamma * lam * (1 - term_t) * (1 - trunc_t) * A_{t+1},  A_T = 0
      targets = A + values[:-1]

    Both outputs are multiplied by mask. ``lam = 1`` gives n-step returns (to the end
    of the rollout, bootstrapped from ``values[T]``); ``lam = 0`` gives one-step TD.

    Returns:
      ``(targets, advantages)``, each ``[T, N]`` float32.
    """
    rewards, values, terminated, truncated, mask = _as_f32(
        rewards, values, terminated, truncated, mask
    )
    gamma, lam = _as_f32(gamma, lam)
    _check_shapes(rewards, values)
    not_term = 1.0 - terminated
    continues = not_term * (1.0 - truncated)
    deltas = rewards + gamma * not_term * values[1:] - values[:-1]
    advantages = _backward_recursion(deltas, gamma * lam * continues, mask)
    targets = (advantages + values[:-1]) * mask
    return targets, advantages * mask


def truncated_importance_weights(behaviour_logp, target_logp, rho_bar=1.0):
    """``stop_gradient(min(rho_bar, exp(target_logp - behaviour_logp)))``, same shape.

    The weights correct for policy lag; they are constants for the learner, so no
    gradient flows through them into the target policy's log-probabilities.
    """
    behaviour_logp, target_logp, rho_bar = _as_f32(behaviour_logp, target_logp, rho_bar)
    ratio = tf.exp(tf.stop_gradient(target_logp) - tf.stop_gradient(behaviour_logp))
    return tf.stop_gradient(tf.minimum(rho_bar, ratio))


def vtrace(
    behaviour_logp,
    target_logp,
    rewards,
    values,
    terminated,
    truncated,
    mask,
    gamma,
    lam=1.0,
    rho_bar=1.0,
    c_bar=1.0,
    pg_bootstrap="vs",
):
    """V-trace targets and policy-gradient advantages (Espeholt et al. 2018, IMPALA).

    Args:
      behaviour_logp: ``[T, N]`` log mu(a_t | x_t), from the worker that acted.
      target_logp: ``[T, N]`` log pi(a_t | x_t), from the learner's current policy.
      rewards, terminated, truncated, mask: ``[T, N]`` float32.
      values: ``[T + 1, N]`` V_target at obs_0 .. obs_T.
      gamma: discount. lam: the paper's lambda, folded into the traces.
      rho_bar, c_bar: truncation levels of the importance weights.
      pg_bootstrap: "vs" (the paper) or "lambda" (rlax), see next_t below.

    Formula (lambda as in the paper's remark, c_t = lam * min(c_bar, ratio))::

      rho_t   = min(rho_bar, pi/mu),  c_t = lam * min(c_bar, pi/mu)
      delta_t = rho_t * (r_t + gamma * (1 - term_t) * values[t+1] - values[t])
      vs_t - values[t] = delta_t
          + gamma * c_t * (1 - term_t) * (1 - trunc_t) * (vs_{t+1} - values[t+1]),
      vs_T = values[T]
      pg_adv_t = rho_t * (r_t + gamma * (1 - term_t) * next_t - values[t]),
      next_t = values[t+1] if step t does not continue, else
               vs_{t+1}                                   (pg_bootstrap = "vs", the paper)
               lam * vs_{t+1} + (1 - lam) * values[t+1]   (pg_bootstrap = "lambda", rlax)

    On-policy (equal log-probs) with rho_bar, c_bar >= 1, vs equals ``gae`` targets
    with the same lam in both forms. The "lambda" form also makes pg_adv equal ``gae``
    advantages at every lam (so lam = 0 is one-step TD for the actor too); the paper's
    form equals them only at lam = 1, and otherwise is delta_t + gamma * (vs_{t+1} -
    values[t+1]): lam shortens the critic's traces, the actor's bootstrap uses them whole.

    Both outputs are multiplied by mask and are constants (stop_gradient): they are
    targets, and no gradient may reach target_logp through the importance weights.

    Returns:
      ``(vs, pg_advantages)``, each ``[T, N]`` float32.
    """
    rewards, values, terminated, truncated, mask = _as_f32(
        rewards, values, terminated, truncated, mask
    )
    gamma, lam, c_bar = _as_f32(gamma, lam, c_bar)
    _check_shapes(rewards, values)
    rhos = truncated_importance_weights(behaviour_logp, target_logp, rho_bar)
    cs = lam * truncated_importance_weights(behaviour_logp, target_logp, c_bar)
    values = tf.stop_gradient(values)

    not_term = 1.0 - terminated
    continues = not_term * (1.0 - truncated)
    deltas = rhos * (rewards + gamma * not_term * values[1:] - values[:-1])
    vs_minus_v = _backward_recursion(deltas, gamma * cs * continues, mask)
    vs = (vs_minus_v + values[:-1]) * mask

    # vs_{t+1} - values[t+1], with vs_T - values[T] = 0 beyond the rollout.
    next_correction = tf.concat([vs_minus_v[1:], tf.zeros_like(vs_minus_v[:1])], axis=0)
    mix = lam if pg_bootstrap == "lambda" else 1.0
    next_value = values[1:] + mix * continues * next_correction
    pg_advantages = rhos * (rewards + gamma * not_term * next_value - values[:-1]) * mask
    return tf.stop_gradient(vs), tf.stop_gradient(pg_advantages)
