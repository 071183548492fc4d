"""Categorical and tanh-squashed Gaussian against NumPy and numerical references."""

import math

import numpy as np
import pytest
import tensorflow as tf

from distributed_ac.learning.distributions import (
    categorical_entropy,
    categorical_log_prob,
    log1m_tanh_sq,
    squash_to_box,
    tanh_gaussian_entropy,
    tanh_gaussian_log_prob,
)
from distributed_ac.models import heads

LOW = np.array([-2.0, 0.0, -1.0], np.float32)
HIGH = np.array([0.0, 5.0, 1.0], np.float32)
HALF_RANGE = (HIGH - LOW) / 2


def normal_cdf(z):
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def density_by_interval_probability(u, mean, std, low, high, rel_eps=1e-4):
    """Density of the env action a = squash(u), from P(a in [a - eps, a + eps]) / (2 eps).

    The interval's bounds are mapped back through atanh of the rescaled action, where
    the probability is a plain Normal CDF difference. Everything here is float64:
    float32 rounding of a +- eps would change the interval's width by ~1e-3.
    """
    low, high = float(low), float(high)
    a = low + (math.tanh(u) + 1.0) / 2.0 * (high - low)
    eps = rel_eps * (high - low) / 2.0

    def pre_squash(x):
        return math.atanh(2.0 * (x - low) / (high - low) - 1.0)

    prob = normal_cdf((pre_squash(a + eps) - mean) / std) - normal_cdf(
        (pre_squash(a - eps) - mean) / std
    )
    return prob / (2.0 * eps)


def random_gaussian(seed, batch=6, dims=3):
    rng = np.random.default_rng(seed)
    mean = rng.normal(0.0, 0.7, size=(batch, dims)).astype(np.float32)
    log_std = rng.uniform(-1.0, 0.5, size=(batch, dims)).astype(np.float32)
    u = np.clip(mean + np.exp(log_std) * rng.normal(size=(batch, dims)), -2.5, 2.5)
    return u.astype(np.float32), mean, log_std


# --- categorical ----------------------------------------------------------------------


def test_categorical_log_prob_matches_numpy_for_time_major_batch():
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 3.0, size=(5, 4, 6)).astype(np.float32)
    actions = rng.integers(0, 6, size=(5, 4))
    expected = np.zeros((5, 4))
    for t in range(5):
        for n in range(4):
            z = logits[t, n].astype(np.float64)
            expected[t, n] = z[actions[t, n]] - np.log(np.sum(np.exp(z)))
    np.testing.assert_allclose(categorical_log_prob(logits, actions).numpy(), expected, atol=1e-5)
    graph = tf.function(categorical_log_prob)(logits, actions.astype(np.int64))
    np.testing.assert_allclose(graph.numpy(), expected, atol=1e-5)


def test_categorical_entropy_matches_numpy():
    rng = np.random.default_rng(1)
    logits = rng.normal(0.0, 2.0, size=(7, 5)).astype(np.float32)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    expected = -np.sum(p * np.log(p), axis=-1)
    np.testing.assert_allclose(categorical_entropy(logits).numpy(), expected, atol=1e-5)


def test_categorical_is_finite_for_huge_logits():
    logits = np.array([[1000.0, -1000.0, 0.0]], np.float32)
    assert np.isfinite(categorical_log_prob(logits, np.array([1])).numpy()).all()
    assert categorical_entropy(logits).numpy()[0] == pytest.approx(0.0, abs=1e-6)


# --- tanh-squashed Gaussian -----------------------------------------------------------


def test_the_tanh_jacobian_on_tensors_is_the_workers_on_arrays_and_float64s():
    """One formula (models/heads.py) on both sides: the TF form against the NumPy one (to
    float32 rounding: the two softplus differ in their last bits), and the formula against
    log(1 - tanh^2) and log(sech^2) in float64."""
    u = np.concatenate([np.linspace(-30, 30, 601), [-1e4, 1e4]]).astype(np.float32)
    on_arrays = heads.log1m_tanh_sq(u)
    assert on_arrays.dtype == np.float32
    np.testing.assert_allclose(log1m_tanh_sq(tf.constant(u)).numpy(), on_arrays, rtol=1e-6,
                               atol=1e-6)
    u64 = u.astype(np.float64)
    small = np.abs(u64) < 5  # where the naive form has its digits
    np.testing.assert_allclose(on_arrays[small], np.log1p(-np.tanh(u64[small]) ** 2),
                               rtol=1e-5, atol=1e-5)
    sech_sq = np.log(4.0) - 2 * np.logaddexp(u64, -u64)  # log(4 / (e^u + e^-u)^2)
    np.testing.assert_allclose(on_arrays, sech_sq, rtol=1e-5, atol=1e-5)


def test_squash_to_box_maps_into_the_box_like_numpy():
    u = np.array([[-30.0, 0.0, 0.3], [30.0, -0.7, 2.0]], np.float32)
    a = squash_to_box(u, LOW, HIGH).numpy()
    np.testing.assert_allclose(a, LOW + (np.tanh(u) + 1) / 2 * (HIGH - LOW), atol=1e-6)
    assert np.all(a >= LOW) and np.all(a <= HIGH)
    assert a[0, 0] == pytest.approx(LOW[0]) and a[1, 0] == pytest.approx(HIGH[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tanh_gaussian_density_matches_interval_probability_per_dim(seed):
    u, mean, log_std = random_gaussian(seed)
    for b in range(u.shape[0]):
        joint = 1.0
        for i in range(u.shape[1]):
            per_dim = density_by_interval_probability(
                float(u[b, i]), float(mean[b, i]), math.exp(log_std[b, i]), LOW[i], HIGH[i]
            )
            one_dim = tanh_gaussian_log_prob(
                u[b, i : i + 1], mean[b, i : i + 1], log_std[b, i : i + 1], HALF_RANGE[i : i + 1]
            )
            np.testing.assert_allclose(np.exp(one_dim.numpy()), per_dim, rtol=1e-3)
            joint *= per_dim
        logp = tanh_gaussian_log_prob(u[b], mean[b], log_std[b], HALF_RANGE)
        np.testing.assert_allclose(np.exp(logp.numpy()), joint, rtol=1e-3)


def test_tanh_gaussian_log_prob_sums_over_last_axis_in_graph_mode():
    u, mean, log_std = random_gaussian(3, batch=10)
    u, mean, log_std = (x.reshape(2, 5, 3) for x in (u, mean, log_std))
    logp = tf.function(tanh_gaussian_log_prob)(u, mean, log_std, HALF_RANGE)
    assert logp.shape == (2, 5)
    eager = tanh_gaussian_log_prob(u, mean, log_std, HALF_RANGE)
    np.testing.assert_allclose(logp.numpy(), eager.numpy(), atol=1e-5)


@pytest.mark.parametrize("u_value", [20.0, -20.0])
def test_tanh_gaussian_log_prob_and_gradients_are_finite_at_large_u(u_value):
    u = np.full((1, 3), u_value, np.float32)
    mean = tf.Variable(np.zeros((1, 3), np.float32))
    log_std = tf.Variable(np.zeros((1, 3), np.float32))
    with tf.GradientTape() as tape:
        logp = tanh_gaussian_log_prob(u, mean, log_std, HALF_RANGE)
    grads = tape.gradient(logp, [mean, log_std])
    assert np.isfinite(logp.numpy()).all()
    assert all(np.isfinite(g.numpy()).all() for g in grads)
    # log(1 - tanh(20)^2) = log(4) - 40 + O(e^-40): the Jacobian term is exact, not clipped.
    gauss = 3 * (-0.5 * u_value**2 - 0.5 * np.log(2 * np.pi))
    expected = gauss - np.sum(np.log(4.0) - 40.0 + np.log(HALF_RANGE))
    np.testing.assert_allclose(logp.numpy(), expected, rtol=1e-5)


def test_tanh_gaussian_entropy_matches_formula_at_given_samples():
    u, mean, log_std = random_gaussian(4)
    expected = np.sum(
        0.5 * np.log(2 * np.pi * np.e)
        + log_std
        + np.log(1 - np.tanh(u.astype(np.float64)) ** 2)
        + np.log(HALF_RANGE),
        axis=-1,
    )
    got = tanh_gaussian_entropy(mean, log_std, u, HALF_RANGE).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4)


def squashed_entropy_by_quadrature(mean: float, log_std: float, half_range: float) -> float:
    """H(a) of a = low + (tanh(u) + 1) * half_range, u ~ N(mean, std), 1-D, float64:
    H(u) + E[log(half_range * (1 - tanh(u)^2))] by 200-point Gauss-Hermite quadrature."""
    x, w = np.polynomial.hermite.hermgauss(200)
    u = mean + np.exp(log_std) * np.sqrt(2.0) * x
    log_jac = np.log(half_range) + 2.0 * (np.log(2.0) - u - np.logaddexp(0.0, -2.0 * u))
    return 0.5 * np.log(2 * np.pi * np.e) + log_std + np.sum(w * log_jac) / np.sqrt(np.pi)


@pytest.mark.parametrize("mean, log_std", [(0.0, -1.0), (0.0, 0.5), (0.8, 0.0), (-1.5, 1.2)])
def test_tanh_gaussian_entropy_and_its_gradient_match_quadrature(mean, log_std):
    """Averaged over quadrature nodes as samples, the estimate equals the true entropy of
    the squashed action, and so does its gradient in mean and log_std (central finite
    differences of the quadrature). The old estimate had d/dlog_std = 1 and d/dmean = 0
    everywhere; at log_std 0.5 and 1.2 the true d/dlog_std is negative."""
    hr = 1.5
    x, w = np.polynomial.hermite.hermgauss(200)
    weights = tf.constant(w / np.sqrt(np.pi), tf.float32)
    m, s = tf.Variable(mean, dtype=tf.float32), tf.Variable(log_std, dtype=tf.float32)
    u = tf.constant((mean + np.exp(log_std) * np.sqrt(2.0) * x)[:, None], tf.float32)
    with tf.GradientTape() as tape:
        per_node = tanh_gaussian_entropy(tf.fill([200, 1], m), tf.fill([200, 1], s), u, [hr])
        estimate = tf.reduce_sum(weights * per_node)
    grad_mean, grad_log_std = (g.numpy() for g in tape.gradient(estimate, [m, s]))
    h, d = squashed_entropy_by_quadrature, 1e-4
    assert estimate.numpy() == pytest.approx(h(mean, log_std, hr), abs=1e-3)
    assert grad_mean == pytest.approx((h(mean + d, log_std, hr) - h(mean - d, log_std, hr))
                                      / (2 * d), abs=2e-3)
    assert grad_log_std == pytest.approx((h(mean, log_std + d, hr) - h(mean, log_std - d, hr))
                                         / (2 * d), abs=2e-3)


@pytest.mark.parametrize("log_std, sign", [(-1.0, 1.0), (1.2, -1.0)])
def test_an_entropy_bonus_raises_a_narrow_std_and_lowers_a_saturating_one(log_std, sign):
    """The old estimate's gradient in log_std was +1 everywhere, so a bonus pushed the std
    up without bound and the actions saturated at the edges of the Box."""
    x, w = np.polynomial.hermite.hermgauss(200)
    s = tf.Variable(log_std, dtype=tf.float32)
    u = tf.constant((np.exp(log_std) * np.sqrt(2.0) * x)[:, None], tf.float32)
    with tf.GradientTape() as tape:
        h = tanh_gaussian_entropy(tf.zeros([200, 1]), tf.fill([200, 1], s), u, [1.0])
        expected_h = tf.reduce_sum(tf.constant(w / np.sqrt(np.pi), tf.float32) * h)
    assert np.sign(tape.gradient(expected_h, s).numpy()) == sign


def test_tanh_gaussian_entropy_estimate_agrees_with_minus_mean_log_prob():
    rng = np.random.default_rng(6)
    mean = np.array([0.3, -0.5, 1.0], np.float32)
    log_std = np.array([-0.5, 0.0, 0.2], np.float32)
    u = (mean + np.exp(log_std) * rng.normal(size=(20000, 3))).astype(np.float32)
    estimate = tf.reduce_mean(tanh_gaussian_entropy(mean, log_std, u, HALF_RANGE)).numpy()
    monte_carlo = -tf.reduce_mean(tanh_gaussian_log_prob(u, mean, log_std, HALF_RANGE)).numpy()
    assert estimate == pytest.approx(monte_carlo, abs=0.05)
