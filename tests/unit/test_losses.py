"""Actor and critic losses against NumPy, with masking and stop_gradient checks."""

import numpy as np
import pytest
import tensorflow as tf

from distributed_ac.learning.losses import (
    actor_loss,
    critic_loss,
    explained_variance,
    masked_mean,
)


def random_inputs(seed, T=8, N=4):
    rng = np.random.default_rng(seed)
    a, b, c = (rng.normal(size=(T, N)).astype(np.float32) for _ in range(3))
    mask = (rng.random((T, N)) > 0.25).astype(np.float32)
    return a, b, c, mask


def masked_mean_reference(x, mask):
    total, count = 0.0, 0.0
    for t in range(x.shape[0]):
        for n in range(x.shape[1]):
            total += x[t, n] * mask[t, n]
            count += mask[t, n]
    return total / max(count, 1.0)


def test_masked_mean_matches_reference():
    x, _, _, mask = random_inputs(0)
    assert masked_mean(x, mask).numpy() == pytest.approx(masked_mean_reference(x, mask), abs=1e-5)


def test_masked_mean_ignores_masked_entries_whatever_their_value():
    x, _, _, mask = random_inputs(1)
    garbage = np.where(mask == 0, 1e6, x).astype(np.float32)
    assert masked_mean(garbage, mask).numpy() == pytest.approx(masked_mean(x, mask).numpy())


def test_masked_mean_of_fully_masked_batch_is_zero_not_nan():
    x = np.ones((3, 2), np.float32)
    assert masked_mean(x, np.zeros_like(x)).numpy() == 0.0


def test_actor_loss_matches_reference_and_reports_parts():
    logp, adv, entropy, mask = random_inputs(2)
    loss, metrics = actor_loss(logp, adv, entropy, mask, entropy_coef=0.01)
    pg = -masked_mean_reference(logp * adv, mask)
    ent = masked_mean_reference(entropy, mask)
    assert loss.numpy() == pytest.approx(pg - 0.01 * ent, abs=1e-5)
    assert metrics["actor_loss"].numpy() == pytest.approx(pg, abs=1e-5)
    assert metrics["entropy"].numpy() == pytest.approx(ent, abs=1e-5)


def test_actor_loss_gradient_does_not_reach_advantages():
    logp, adv, entropy, mask = random_inputs(3)
    logp, adv = tf.Variable(logp), tf.Variable(adv)
    with tf.GradientTape() as tape:
        loss, _ = actor_loss(logp, adv, entropy, mask, 0.01)
    grad_logp, grad_adv = tape.gradient(loss, [logp, adv])
    assert grad_adv is None or not np.any(grad_adv.numpy())
    # d loss / d logp = -adv * mask / count: masked steps get exactly no gradient.
    np.testing.assert_allclose(
        grad_logp.numpy(), -adv.numpy() * mask / mask.sum(), atol=1e-6
    )


def test_critic_loss_matches_reference_in_graph_mode():
    values, targets, _, mask = random_inputs(4)
    loss, metrics = tf.function(critic_loss)(values, targets, mask)
    expected = 0.5 * masked_mean_reference((values - targets) ** 2, mask)
    assert loss.numpy() == pytest.approx(expected, abs=1e-5)
    assert metrics["critic_loss"].numpy() == pytest.approx(expected, abs=1e-5)


def test_critic_loss_gradient_does_not_reach_targets():
    values, targets, _, mask = random_inputs(5)
    values, targets = tf.Variable(values), tf.Variable(targets)
    with tf.GradientTape() as tape:
        loss, _ = critic_loss(values, targets, mask)
    grad_values, grad_targets = tape.gradient(loss, [values, targets])
    assert grad_targets is None or not np.any(grad_targets.numpy())
    np.testing.assert_allclose(
        grad_values.numpy(), (values.numpy() - targets.numpy()) * mask / mask.sum(), atol=1e-6
    )


def clipped_critic_reference(values, targets, mask, clip):
    """0.5 * masked_mean(min((V - target)^2, clip)) and its gradient in V, step by step:
    (V - target) / count where the squared error is under the clip, 0 where it is over."""
    count = max(mask.sum(), 1.0)
    total, grad = 0.0, np.zeros(values.shape)
    for t in range(values.shape[0]):
        for n in range(values.shape[1]):
            err = float(values[t, n]) - float(targets[t, n])
            total += min(err * err, clip) * mask[t, n]
            if err * err < clip:
                grad[t, n] = err * mask[t, n] / count
    return 0.5 * total / count, grad


def test_the_clipped_critic_loss_caps_each_steps_squared_error_and_its_gradient():
    values, targets, _, mask = random_inputs(8)
    values = values * 3.0  # errors of up to ~10: some past the clip of 4, some under
    x = tf.Variable(values)
    with tf.GradientTape() as tape:
        loss, metrics = tf.function(critic_loss)(x, targets, mask, 4.0)
    expected, grad = clipped_critic_reference(values, targets, mask, 4.0)
    over = ((values - targets) ** 2 > 4.0) & (mask > 0)
    assert over.any() and (~over & (mask > 0)).any()
    assert loss.numpy() == pytest.approx(expected, abs=1e-5)
    assert metrics["critic_loss"].numpy() == pytest.approx(expected, abs=1e-5)
    got = tape.gradient(loss, x).numpy()
    np.testing.assert_allclose(got, grad, atol=1e-6)
    assert not np.any(got[over])


def test_a_critic_loss_clip_of_zero_is_the_unclipped_loss_exactly():
    values, targets, _, mask = random_inputs(9)
    values = values * 3.0
    plain, _ = critic_loss(values, targets, mask)
    assert critic_loss(values, targets, mask, 0.0)[0].numpy() == plain.numpy()
    assert critic_loss(values, targets, mask, 1e9)[0].numpy() == pytest.approx(plain.numpy())


def test_explained_variance_is_one_for_perfect_values():
    _, targets, _, mask = random_inputs(6)
    _, metrics = critic_loss(targets, targets, mask)
    assert metrics["explained_variance"].numpy() == pytest.approx(1.0)


def test_explained_variance_is_about_zero_for_constant_mean_prediction():
    _, targets, _, mask = random_inputs(7)
    mean = np.full_like(targets, masked_mean_reference(targets, mask))
    assert explained_variance(mean, targets, mask).numpy() == pytest.approx(0.0, abs=1e-5)


def test_explained_variance_uses_only_unmasked_entries():
    _, targets, _, mask = random_inputs(8)
    values = np.where(mask == 0, 1e3, targets).astype(np.float32)
    assert explained_variance(values, targets, mask).numpy() == pytest.approx(1.0)


@pytest.mark.parametrize("constant", [0.0, 0.1, 123.4])
def test_explained_variance_is_zero_not_nan_for_constant_targets(constant):
    targets = np.full((5, 3), constant, np.float32)
    values = targets + np.arange(15, dtype=np.float32).reshape(5, 3)
    ev = explained_variance(values, targets, np.ones_like(targets)).numpy()
    assert ev == 0.0


def test_clipped_surrogate_matches_numpy_and_clips_only_the_side_that_gains():
    from distributed_ac.learning.losses import clipped_actor_loss

    rng = np.random.default_rng(0)
    old = rng.normal(size=(6, 5)).astype(np.float32)
    logp = old + rng.normal(scale=0.5, size=(6, 5)).astype(np.float32)
    adv = rng.normal(size=(6, 5)).astype(np.float32)
    ent = rng.uniform(size=(6, 5)).astype(np.float32)
    mask = (rng.uniform(size=(6, 5)) > 0.2).astype(np.float32)
    loss, m = clipped_actor_loss(tf.constant(logp), tf.constant(old), tf.constant(adv),
                                 tf.constant(ent), tf.constant(mask), 0.2, 0.01)
    r = np.exp(logp - old)
    surr = np.minimum(r * adv, np.clip(r, 0.8, 1.2) * adv)
    mean = lambda x: (x * mask).sum() / mask.sum()  # noqa: E731
    np.testing.assert_allclose(m["actor_loss"].numpy(), -mean(surr), rtol=1e-5)
    np.testing.assert_allclose(loss.numpy(), -mean(surr) - 0.01 * mean(ent), rtol=1e-5)
    np.testing.assert_allclose(m["clip_fraction"].numpy(), mean(np.abs(r - 1) > 0.2), rtol=1e-6)
    # a ratio already past 1 + clip with a positive advantage gives no more gradient;
    # with a negative advantage it still does (the pessimistic bound)
    for a, grad_zero in ((1.0, True), (-1.0, False)):
        x = tf.Variable([[np.log(1.5)]], dtype=tf.float32)
        with tf.GradientTape() as tape:
            loss, _ = clipped_actor_loss(x, tf.zeros((1, 1)), tf.constant([[a]]),
                                         tf.zeros((1, 1)), tf.ones((1, 1)), 0.2, 0.0)
        g = tape.gradient(loss, x).numpy()[0, 0]
        assert (g == 0.0) == grad_zero, (a, g)


def test_clipped_surrogate_stays_finite_for_huge_ratios_and_ignores_masked_steps():
    """A reset step's ignored action can have any log-prob under the new policy; an
    unmasked step far off the old policy must not overflow float32 either."""
    from distributed_ac.learning.losses import clipped_actor_loss

    logp = tf.Variable([[500.0, 300.0, 0.1]])
    old, adv = tf.zeros((1, 3)), tf.constant([[-1.0, 1.0, 1.0]])
    mask = tf.constant([[0.0, 1.0, 1.0]])  # the first step is a reset step
    with tf.GradientTape() as tape:
        loss, m = clipped_actor_loss(logp, old, adv, tf.zeros((1, 3)), mask, 0.2, 0.0)
    grad = tape.gradient(loss, logp).numpy()
    assert np.isfinite(loss.numpy()) and all(np.isfinite(v.numpy()) for v in m.values())
    assert grad[0, 0] == 0.0 and grad[0, 1] == 0.0  # masked; clipped on the gaining side
    assert grad[0, 2] != 0.0  # an ordinary step still learns


def test_kl_estimate_is_the_exact_kl_when_actions_come_in_mu_s_proportions():
    """k3 = (r - 1) - log r, averaged over actions drawn from mu, is KL(mu || pi): with
    each action present in exactly mu's proportions the mean is the KL itself. Masked
    steps count for nothing, whatever their log-ratio."""
    from distributed_ac.learning.losses import kl_estimate

    mu, pi = np.array([0.5, 0.25, 0.25]), np.array([0.2, 0.3, 0.5])
    actions = [0, 0, 1, 2]  # mu's proportions
    log_ratio = np.log(pi[actions] / mu[actions])
    exact = float(np.sum(mu * np.log(mu / pi)))
    masked_garbage = np.append(log_ratio, 1e4)[None].astype(np.float32)
    mask = np.array([[1.0, 1.0, 1.0, 1.0, 0.0]], np.float32)
    assert float(kl_estimate(masked_garbage, mask)) == pytest.approx(exact, rel=1e-5)
    assert float(kl_estimate(np.zeros((1, 4), np.float32), np.ones((1, 4)))) == 0.0


def test_the_kl_penalty_adds_kl_coef_times_k3_and_its_gradient_to_the_surrogate():
    """With kl_coef the loss gains kl_coef * masked_mean((r - 1) - log r), differentiable:
    d/dlogp = kl_coef * (r - 1) * mask / sum(mask). approx_kl is that same k3 mean."""
    from distributed_ac.learning.losses import clipped_actor_loss

    rng = np.random.default_rng(4)
    old = rng.normal(size=(6, 5)).astype(np.float32)
    logp = old + rng.normal(scale=0.3, size=(6, 5)).astype(np.float32)
    adv, ent = rng.normal(size=(6, 5)).astype(np.float32), rng.uniform(size=(6, 5)).astype(np.float32)
    mask = (rng.uniform(size=(6, 5)) > 0.2).astype(np.float32)
    x = tf.Variable(logp)
    with tf.GradientTape(persistent=True) as tape:
        loss, m = clipped_actor_loss(x, old, adv, ent, mask, 0.2, 0.01, kl_coef=0.3)
        plain, plain_m = clipped_actor_loss(x, old, adv, ent, mask, 0.2, 0.01)
    r = np.exp(logp.astype(np.float64) - old)
    k3 = masked_mean_reference(r - 1.0 - np.log(r), mask)
    surrogate = np.minimum(r * adv, np.clip(r, 0.8, 1.2) * adv)
    expected = (-masked_mean_reference(surrogate, mask) - 0.01 * masked_mean_reference(ent, mask)
                + 0.3 * k3)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(m["approx_kl"].numpy(), k3, rtol=1e-5)
    assert m["approx_kl"].numpy() == plain_m["approx_kl"].numpy()
    grad_penalty = (tape.gradient(loss, x) - tape.gradient(plain, x)).numpy()
    np.testing.assert_allclose(grad_penalty, 0.3 * (r - 1.0) * mask / mask.sum(), atol=1e-6)


def adapted_reference(coef, kl, target):
    if kl > 2.0 * target:
        return coef * 1.5
    if kl < 0.5 * target:
        return coef * 0.5
    return coef


@pytest.mark.parametrize("kl", [0.0, 0.004, 0.005, 0.0051, 0.01, 0.02, 0.0201, 0.5])
def test_the_kl_coefficient_rises_past_twice_the_target_and_falls_below_half_of_it(kl):
    from distributed_ac.learning.losses import adapted_kl_coef

    got = float(adapted_kl_coef(tf.constant(0.2), tf.constant(kl, tf.float32), 0.01))
    assert got == pytest.approx(adapted_reference(0.2, np.float32(kl), np.float32(0.01)), rel=1e-6)
