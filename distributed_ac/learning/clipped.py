"""The clipped-surrogate update (policy_loss = "clip"): PPO in sync mode, APPO-style in
async mode. Several passes over shuffled minibatches of one learner batch, each pass an
actor step and a critic step with their own optimizers and global-norm clips, all inside
the learner's one tf.function (a tf.while_loop, so the graph holds one copy of the step).

Targets and advantages are computed once, before the first pass, with the learner's
policy at that moment, pi_old: GAE in sync mode (where pi_old is the behaviour policy),
V-trace in async mode (correcting behaviour -> pi_old). The surrogate's ratio is
pi_theta / pi_old, so at the first minibatch its gradient equals the policy gradient the
"pg" loss would take; the clip then bounds how far the later passes move the policy.
"""

from __future__ import annotations

import tensorflow as tf

from distributed_ac.learning import losses

METRICS = ("actor_loss", "entropy", "clip_fraction", "approx_kl", "critic_loss",
           "explained_variance", "grad_norm_actor", "grad_norm_critic")


def clipped_update(learner, obs, actions, targets, adv, mask, old_logp):
    """Run update_epochs passes of about minibatch_size-sample gradient steps; returns
    (mean metrics, whether every step was finite). A non-finite minibatch skips its own
    step (graph ops)."""
    cfg = learner.cfg
    flat = lambda x: tf.reshape(x, [-1])  # noqa: E731  [T, N] -> [T * N]
    if learner.space.discrete:
        actions = flat(actions)
    else:
        actions = tf.reshape(actions, [-1, learner.space.num_actions])
    targets, adv, mask, old_logp = flat(targets), flat(adv), flat(mask), flat(old_logp)
    n = tf.shape(adv)[0]
    epochs = cfg.update_epochs
    parts = minibatch_parts(n, cfg.minibatch_size)
    # one permutation per pass, from the learner's checkpointed generator
    order = tf.concat([tf.argsort(learner.shuffle_rng.uniform([n])) for _ in range(epochs)], 0)

    def body(i, all_finite, sums):
        start, stop = minibatch_bounds(n, parts, i % parts)
        idx = tf.gather(order, tf.range(start, stop) + (i // parts) * n)
        take = lambda x: tf.gather(x, idx)  # noqa: E731
        metrics, finite = _minibatch_step(learner, take(obs), take(actions), take(targets),
                                          take(adv), take(mask), take(old_logp))
        return i + 1, tf.logical_and(all_finite, finite), sums + metrics

    _, all_finite, sums = tf.while_loop(
        lambda i, *_: i < epochs * parts, body,
        (tf.constant(0), tf.constant(True), tf.zeros(len(METRICS))))
    means = tf.unstack(sums / tf.cast(epochs * parts, tf.float32))
    return dict(zip(METRICS, means)), all_finite


def minibatch_parts(n, minibatch_size: int):
    """How many minibatches n samples make: round(n / minibatch_size), at least 1 (as
    plan.minibatch_count does for the planned batch)."""
    return tf.maximum(1, tf.cast(tf.round(n / minibatch_size), tf.int32))


def minibatch_bounds(n, parts, j):
    """[start, stop) of minibatch j of `parts` over n samples: an even split, sizes
    differing by at most one, none empty while parts <= n."""
    return j * n // parts, (j + 1) * n // parts


def _minibatch_step(learner, obs, actions, targets, adv, mask, old_logp):
    cfg, nets = learner.cfg, learner.nets
    with tf.GradientTape(persistent=True) as tape:
        logp, entropy, v = learner.policy_value_terms(obs, actions, tf.shape(adv))
        a_loss, a_m = losses.clipped_actor_loss(logp, old_logp, adv, entropy, mask,
                                                cfg.clip_ratio, cfg.entropy_coef)
        c_loss, c_m = losses.critic_loss(v, targets, mask)
        actor_total = a_loss + cfg.vf_coef * c_loss if nets.shared else a_loss
    a_norm, c_norm, finite = learner.apply_gradients(tape, actor_total, c_loss)
    del tape
    m = {**a_m, **c_m, "grad_norm_actor": a_norm, "grad_norm_critic": c_norm}
    return tf.stack([tf.cast(m[k], tf.float32) for k in METRICS]), finite
