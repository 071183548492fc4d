"""The clipped-surrogate update's schedule (policy_loss = "clip"): PPO in sync mode,
APPO-style in async mode. Several passes over shuffled minibatches of one learner batch,
each minibatch one step of both optimizers, all inside the learner's one tf.function (a
tf.while_loop, so the graph holds one copy of the step).

Targets and advantages are computed once, before the first pass, with the learner's
policy at that moment, pi_old (Learner._clipped_update): GAE in sync mode (where pi_old
is the behaviour policy), V-trace in async mode (correcting behaviour -> pi_old). The
surrogate's ratio is pi_theta / pi_old, so at the first minibatch its gradient equals
the policy gradient the "pg" loss would take; the clip then bounds how far the later
passes move the policy.
"""

from __future__ import annotations

import tensorflow as tf

METRICS = ("actor_loss", "entropy", "clip_fraction", "approx_kl", "critic_loss",
           "explained_variance", "grad_norm_actor", "grad_norm_critic")


def clipped_update(minibatch_step, columns: dict, epochs: int, minibatch_size: int, rng):
    """Run `epochs` passes over the samples of `columns` (name -> [n, ...] tensors) in
    minibatches of about minibatch_size, each shuffled by `rng` (a checkpointed
    tf.random.Generator), calling minibatch_step(**minibatch) -> (metrics [len(METRICS)],
    finite). Returns (mean metrics, whether every step was finite)."""
    n = tf.shape(columns["adv"])[0]

    def take(idx):  # an observation column may be a dict of arrays (a mixed observation)
        return {k: tf.nest.map_structure(lambda t: tf.gather(t, idx), v)
                for k, v in columns.items()}

    return _passes(minibatch_step, take, n, minibatch_parts(n, minibatch_size), epochs, rng)


def clipped_update_sequences(minibatch_step, columns: dict, states: dict, epochs: int,
                             minibatch_size: int, rng):
    """clipped_update for a recurrent model: minibatches are whole sub-env sequences
    (cleanRL's ppo_atari_lstm.py), never shuffled time steps. `columns` are [T, N, ...]
    tensors and `states` tuples of [N, H] (each sub-env's core state at the rollout's
    start); about minibatch_size / T sub-envs a minibatch, split evenly."""
    T, n = tf.shape(columns["adv"])[0], tf.shape(columns["adv"])[1]

    def take(idx):
        return {**{k: tf.nest.map_structure(lambda t: tf.gather(t, idx, axis=1), v)
                   for k, v in columns.items()},
                **{k: tuple(tf.gather(s, idx) for s in v) for k, v in states.items()}}

    parts = tf.minimum(minibatch_parts(T * n, minibatch_size), n)
    return _passes(minibatch_step, take, n, parts, epochs, rng)


def chunked(columns: dict, entering: dict, length: int) -> tuple[dict, dict]:
    """Cut each sub-env's T-step sequence into T / length chunks of `length` steps, as
    clipped_update_sequences takes sequences: columns [T, N, ...] -> [length, T / length
    * N, ...] (chunk c of sub-env n is column c * N + n), and each chunk's core state, the
    one its first step was entered with (`entering`: name -> tuple of [T, N, H]) -> name
    -> tuple of [T / length * N, H]. Gradients then stop at the chunk's start (truncated
    back-propagation through time, Sample Factory's recurrence)."""
    def cut(t):
        steps, n = tf.shape(t)[0], tf.shape(t)[1]
        rest = tf.shape(t)[2:]
        t = tf.reshape(t, tf.concat([[steps // length, length, n], rest], 0))
        t = tf.transpose(t, tf.concat([[1, 0], tf.range(2, tf.rank(t))], 0))
        out = tf.reshape(t, tf.concat([[length, (steps // length) * n], rest], 0))
        out.set_shape([length, None, *t.shape[3:]])  # a static T: the core unrolls in the graph
        return out

    def starts_of(s):  # [T, N, H] -> the states at t = 0, length, 2 length, ...
        return tf.reshape(s[::length], [-1, tf.shape(s)[-1]])

    return ({k: tf.nest.map_structure(cut, v) for k, v in columns.items()},
            {k: tuple(starts_of(s) for s in v) for k, v in entering.items()})


def _passes(minibatch_step, take, n, parts, epochs: int, rng):
    """`epochs` shuffled passes over n items in `parts` minibatches each; take(indices)
    makes a minibatch's arguments. Returns (mean metrics, whether every step was finite)."""
    order = tf.concat([tf.argsort(rng.uniform([n])) for _ in range(epochs)], 0)

    def body(i, all_finite, sums):
        start, stop = minibatch_bounds(n, parts, i % parts)
        idx = tf.gather(order, tf.range(start, stop) + (i // parts) * n)
        metrics, finite = minibatch_step(**take(idx))
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
