"""GAE and V-trace against slow NumPy references written like the formulas."""

from functools import partial

import batches
import numpy as np
import pytest
import tensorflow as tf
from batches import numpy_of

from distributed_ac.learning.advantages import gae, truncated_importance_weights, vtrace

ATOL = 1e-5


# --- NumPy references: loops over n and t, exactly as the docstrings read -------------


def gae_reference(rewards, values, terminated, truncated, mask, gamma, lam):
    T, N = rewards.shape
    advantages = np.zeros((T, N))
    for n in range(N):
        next_adv = 0.0
        for t in reversed(range(T)):
            delta = rewards[t, n] + gamma * (1 - terminated[t, n]) * values[t + 1, n] - values[t, n]
            cont = (1 - terminated[t, n]) * (1 - truncated[t, n])
            advantages[t, n] = delta + gamma * lam * cont * next_adv
            next_adv = advantages[t, n]
    targets = (advantages + values[:-1]) * mask
    return targets, advantages * mask


def vtrace_reference(
    blogp, tlogp, rewards, values, terminated, truncated, mask, gamma, lam, rho_bar, c_bar,
    pg_bootstrap="vs",
):
    T, N = rewards.shape
    vs = np.zeros((T + 1, N))
    pg = np.zeros((T, N))
    for n in range(N):
        vs[T, n] = values[T, n]
        for t in reversed(range(T)):
            ratio = np.exp(tlogp[t, n] - blogp[t, n])
            rho, c = min(rho_bar, ratio), lam * min(c_bar, ratio)
            not_term = 1 - terminated[t, n]
            cont = not_term * (1 - truncated[t, n])
            delta = rho * (rewards[t, n] + gamma * not_term * values[t + 1, n] - values[t, n])
            vs[t, n] = values[t, n] + delta + gamma * c * cont * (vs[t + 1, n] - values[t + 1, n])
            # after a step that continues: vs (the paper) or lam * vs + (1 - lam) * V
            # (rlax); V alone after a truncation (and nothing after a termination)
            mix = lam if pg_bootstrap == "lambda" else 1.0
            next_value = (mix * vs[t + 1, n] + (1 - mix) * values[t + 1, n] if cont
                          else values[t + 1, n])
            pg[t, n] = rho * (rewards[t, n] + gamma * not_term * next_value - values[t, n])
    return vs[:-1] * mask, pg * mask


# a rollout whose mask is consistent with NEXT_STEP autoreset (batches.random_rollout)
random_rollout = partial(batches.random_rollout, T=12, N=5, p_done=0.2, p_start_reset=0.3)


def logps(seed, T=12, N=5, scale=0.5):
    rng = np.random.default_rng(seed + 1000)
    blogp = rng.normal(-1.0, scale, size=(T, N)).astype(np.float32)
    tlogp = (blogp + rng.normal(0.0, scale, size=(T, N))).astype(np.float32)
    return blogp, tlogp


# --- GAE ------------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_matches_numpy_reference(seed, lam):
    batch = random_rollout(seed)
    expected = gae_reference(*batch, gamma=0.97, lam=lam)
    got = numpy_of(*gae(*batch, gamma=0.97, lam=lam))
    np.testing.assert_allclose(got[0], expected[0], atol=ATOL)
    np.testing.assert_allclose(got[1], expected[1], atol=ATOL)


def test_gae_inside_tf_function_matches_eager():
    batch = random_rollout(3)
    graph_gae = tf.function(gae)
    eager = numpy_of(*gae(*batch, gamma=0.9, lam=0.8))
    graph = numpy_of(*graph_gae(*[tf.constant(x) for x in batch], gamma=0.9, lam=0.8))
    np.testing.assert_allclose(graph[0], eager[0], atol=ATOL)
    np.testing.assert_allclose(graph[1], eager[1], atol=ATOL)


def test_gamma_zero_makes_targets_equal_rewards_on_unmasked_steps():
    rewards, values, terminated, truncated, mask = random_rollout(4)
    targets, _ = gae(rewards, values, terminated, truncated, mask, gamma=0.0, lam=0.95)
    np.testing.assert_allclose(targets.numpy(), rewards * mask, atol=ATOL)


def test_lambda_zero_is_one_step_td():
    rewards, values, terminated, truncated, mask = random_rollout(5)
    targets, advantages = gae(rewards, values, terminated, truncated, mask, 0.9, 0.0)
    td_target = rewards + 0.9 * (1 - terminated) * values[1:]
    np.testing.assert_allclose(targets.numpy(), td_target * mask, atol=ATOL)
    np.testing.assert_allclose(advantages.numpy(), (td_target - values[:-1]) * mask, atol=ATOL)


def test_lambda_one_is_discounted_return_bootstrapped_from_last_value():
    T, gamma = 5, 0.9
    rewards = np.arange(1, T + 1, dtype=np.float32)[:, None]
    values = np.linspace(-1, 1, T + 1, dtype=np.float32)[:, None]
    zeros, ones = np.zeros((T, 1), np.float32), np.ones((T, 1), np.float32)
    targets, _ = gae(rewards, values, zeros, zeros, ones, gamma, 1.0)
    expected = [
        sum(gamma ** (k - t) * rewards[k, 0] for k in range(t, T)) + gamma ** (T - t) * values[T, 0]
        for t in range(T)
    ]
    np.testing.assert_allclose(targets.numpy()[:, 0], expected, atol=ATOL)


def single_episode_end(flag):
    """One env, 4 steps; step 1 ends the episode by `flag`; step 2 is the reset step."""
    rewards = np.array([[1.0], [2.0], [5.0], [3.0]], np.float32)
    values = np.array([[10.0], [20.0], [30.0], [40.0], [50.0]], np.float32)
    terminated = np.zeros((4, 1), np.float32)
    truncated = np.zeros((4, 1), np.float32)
    {"terminated": terminated, "truncated": truncated}[flag][1] = 1
    mask = np.array([[1.0], [1.0], [0.0], [1.0]], np.float32)
    return rewards, values, terminated, truncated, mask


def test_termination_does_not_bootstrap():
    targets, _ = gae(*single_episode_end("terminated"), gamma=0.5, lam=1.0)
    assert targets.numpy()[1, 0] == pytest.approx(2.0)
    assert targets.numpy()[0, 0] == pytest.approx(1.0 + 0.5 * 2.0)


def test_truncation_bootstraps_from_final_observation_value():
    targets, _ = gae(*single_episode_end("truncated"), gamma=0.5, lam=1.0)
    # values[2] is V_target of the real final observation returned by step 1.
    assert targets.numpy()[1, 0] == pytest.approx(2.0 + 0.5 * 30.0)
    assert targets.numpy()[0, 0] == pytest.approx(1.0 + 0.5 * (2.0 + 0.5 * 30.0))


def test_termination_and_truncation_at_same_step_give_different_targets():
    term, _ = gae(*single_episode_end("terminated"), gamma=0.5, lam=0.9)
    trunc, _ = gae(*single_episode_end("truncated"), gamma=0.5, lam=0.9)
    assert not np.allclose(term.numpy()[:2], trunc.numpy()[:2])
    np.testing.assert_allclose(term.numpy()[2:], trunc.numpy()[2:], atol=ATOL)


def test_masked_reset_step_in_the_middle_is_zero_and_does_not_leak_backwards():
    batch = single_episode_end("truncated")
    targets, advantages = gae(*batch, gamma=0.5, lam=1.0)
    rewards = batch[0].copy()
    rewards[2] = 1000.0  # the reset step's reward must not matter
    targets_big, _ = gae(rewards, *batch[1:], gamma=0.5, lam=1.0)
    assert targets.numpy()[2, 0] == 0.0 and advantages.numpy()[2, 0] == 0.0
    assert targets_big.numpy()[2, 0] == 0.0
    np.testing.assert_array_equal(targets_big.numpy()[:2], targets.numpy()[:2])
    # The new episode starting at step 3 is bootstrapped from values[4] as usual.
    assert targets.numpy()[3, 0] == pytest.approx(3.0 + 0.5 * 50.0)


def test_masked_reset_step_at_t0_is_zero_and_later_steps_unaffected():
    rewards = np.array([[7.0], [1.0], [2.0]], np.float32)
    values = np.array([[3.0], [4.0], [5.0], [6.0]], np.float32)
    zeros = np.zeros((3, 1), np.float32)
    mask = np.array([[0.0], [1.0], [1.0]], np.float32)
    for fn in (gae, tf.function(gae)):
        targets, advantages = fn(rewards, values, zeros, zeros, mask, 0.5, 1.0)
        assert targets.numpy()[0, 0] == 0.0 and advantages.numpy()[0, 0] == 0.0
        np.testing.assert_allclose(targets.numpy()[1:, 0], [1 + 0.5 * (2 + 0.5 * 6), 2 + 0.5 * 6])


def test_values_must_have_one_more_row_than_rewards():
    rewards, values, terminated, truncated, mask = random_rollout(6)
    with pytest.raises(ValueError, match=r"\[T \+ 1, N\]"):
        gae(rewards, values[:-1], terminated, truncated, mask, 0.9, 0.9)


# --- V-trace --------------------------------------------------------------------------


@pytest.mark.parametrize("pg_bootstrap", ["vs", "lambda"])
@pytest.mark.parametrize("lam,rho_bar,c_bar", [(1.0, 1.0, 1.0), (0.9, 2.0, 1.0), (0.5, 0.8, 0.6)])
@pytest.mark.parametrize("seed", [0, 1])
def test_vtrace_matches_numpy_reference(seed, lam, rho_bar, c_bar, pg_bootstrap):
    batch = random_rollout(seed)
    blogp, tlogp = logps(seed)
    expected = vtrace_reference(blogp, tlogp, *batch, 0.95, lam, rho_bar, c_bar, pg_bootstrap)
    got = numpy_of(*vtrace(blogp, tlogp, *batch, 0.95, lam=lam, rho_bar=rho_bar, c_bar=c_bar,
                           pg_bootstrap=pg_bootstrap))
    np.testing.assert_allclose(got[0], expected[0], atol=ATOL)
    np.testing.assert_allclose(got[1], expected[1], atol=ATOL)


def test_vtrace_inside_tf_function_matches_eager():
    batch = [tf.constant(x) for x in random_rollout(7)]
    blogp, tlogp = logps(7)
    eager = numpy_of(*vtrace(blogp, tlogp, *batch, 0.9, lam=0.9, rho_bar=1.5))
    graph = numpy_of(*tf.function(vtrace)(blogp, tlogp, *batch, 0.9, lam=0.9, rho_bar=1.5))
    np.testing.assert_allclose(graph[0], eager[0], atol=ATOL)
    np.testing.assert_allclose(graph[1], eager[1], atol=ATOL)


def test_vtrace_on_policy_with_lambda_one_equals_gae_lambda_one():
    batch = random_rollout(8)
    blogp, _ = logps(8)
    vs, pg = vtrace(blogp, blogp, *batch, 0.95)
    targets, advantages = gae(*batch, 0.95, 1.0)
    np.testing.assert_allclose(vs.numpy(), targets.numpy(), atol=ATOL)
    np.testing.assert_allclose(pg.numpy(), advantages.numpy(), atol=ATOL)


@pytest.mark.parametrize("lam", [0.0, 0.7, 0.95])
@pytest.mark.parametrize("pg_bootstrap", ["vs", "lambda"])
def test_vtrace_on_policy_equals_gae_targets_with_same_lambda(lam, pg_bootstrap):
    batch = random_rollout(9)
    blogp, _ = logps(9)
    vs, _ = vtrace(blogp, blogp, *batch, 0.95, lam=lam, pg_bootstrap=pg_bootstrap)
    targets, _ = gae(*batch, 0.95, lam)
    np.testing.assert_allclose(vs.numpy(), targets.numpy(), atol=ATOL)


@pytest.mark.parametrize("lam", [0.0, 0.7, 0.95])
def test_vtrace_lambda_bootstrap_on_policy_equals_gae_advantages_at_any_lambda(lam):
    """pg_bootstrap = "lambda": sync (GAE) and async (V-trace) actors weight advantages
    alike, and gae_lambda = 0 means one-step TD for both."""
    batch = random_rollout(9)
    blogp, _ = logps(9)
    _, pg = vtrace(blogp, blogp, *batch, 0.95, lam=lam, pg_bootstrap="lambda")
    _, advantages = gae(*batch, 0.95, lam)
    np.testing.assert_allclose(pg.numpy(), advantages.numpy(), atol=ATOL)


@pytest.mark.parametrize("lam", [0.0, 0.7])
def test_vtrace_paper_bootstrap_on_policy_is_one_td_error_plus_the_whole_next_trace(lam):
    """pg_bootstrap = "vs" (the default): delta_t + gamma * (vs_{t+1} - V_{t+1}) after a
    continuing step, which is not GAE's advantage when lam < 1."""
    rewards, values, term, trunc, mask = batch = random_rollout(9)
    blogp, _ = logps(9)
    vs, pg = (x.numpy() for x in vtrace(blogp, blogp, *batch, 0.95, lam=lam))
    _, advantages = gae(*batch, 0.95, lam)
    vs_next = np.concatenate([vs[1:], values[-1:]])  # vs_T = V_T past the rollout
    cont = (1 - term) * (1 - trunc)
    delta = rewards + 0.95 * (1 - term) * values[1:] - values[:-1]
    expected = (delta + 0.95 * cont * (vs_next - values[1:])) * mask
    np.testing.assert_allclose(pg, expected, atol=ATOL)
    assert not np.allclose(pg, advantages.numpy(), atol=1e-3)


def test_vtrace_clips_large_ratios_to_rho_bar():
    batch = random_rollout(10)
    blogp, _ = logps(10)
    far_off_policy = blogp + 5.0  # ratio e^5 ~ 148 everywhere
    vs, pg = vtrace(blogp, far_off_policy, *batch, 0.95, rho_bar=1.0, c_bar=1.0)
    on_vs, on_pg = vtrace(blogp, blogp, *batch, 0.95)
    np.testing.assert_allclose(vs.numpy(), on_vs.numpy(), atol=ATOL)
    np.testing.assert_allclose(pg.numpy(), on_pg.numpy(), atol=ATOL)


def test_truncated_importance_weights_are_clipped_ratios():
    blogp = np.log(np.array([0.5, 0.1, 0.4], np.float32))
    tlogp = np.log(np.array([0.25, 0.9, 0.4], np.float32))
    weights = truncated_importance_weights(blogp, tlogp, rho_bar=2.0).numpy()
    np.testing.assert_allclose(weights, [0.5, 2.0, 1.0], rtol=1e-6)


def test_no_gradient_flows_through_vtrace_or_importance_weights():
    batch = random_rollout(11)
    blogp, tlogp = logps(11)
    tlogp = tf.Variable(tlogp)
    with tf.GradientTape(persistent=True) as tape:
        vs, pg = vtrace(blogp, tlogp, *batch, 0.95, lam=0.9)
        total = tf.reduce_sum(vs) + tf.reduce_sum(pg)
        weights = tf.reduce_sum(truncated_importance_weights(blogp, tlogp, 2.0))
    for grad in (tape.gradient(total, tlogp), tape.gradient(weights, tlogp)):
        assert grad is None or not np.any(grad.numpy())


def test_vtrace_reset_step_is_zero_and_its_reward_does_not_leak():
    rewards, values, terminated, truncated, mask = single_episode_end("terminated")
    blogp, tlogp = logps(12, T=4, N=1)
    vs, pg = vtrace(blogp, tlogp, rewards, values, terminated, truncated, mask, 0.5)
    rewards_big = rewards.copy()
    rewards_big[2] = 1000.0
    vs_big, pg_big = vtrace(blogp, tlogp, rewards_big, values, terminated, truncated, mask, 0.5)
    assert vs.numpy()[2, 0] == 0.0 and pg.numpy()[2, 0] == 0.0
    np.testing.assert_array_equal(vs_big.numpy(), vs.numpy())
    np.testing.assert_array_equal(pg_big.numpy(), pg.numpy())
