"""GAE and V-trace against their explicit-sum (non-recursive) definitions.

tests/unit/test_returns.py compares both estimators with NumPy loops that run the same
backward recursion as learning/advantages.py, so a mistake shared by the recursion and
its copy would pass there. Here each output is the sum the papers write down, term by
term:

  GAE:     A_t   = sum_{l>=0} (gamma lam)^l delta_{t+l}
  V-trace: v_s   = V_s + sum_{t>=s} gamma^{t-s} (prod_{i=s}^{t-1} c_i) rho_t delta_t

Both sums stop after the step that ends the episode (terminated or truncated), at the
end of the rollout, and before a mask-0 reset step; a reset step's own outputs are 0.
"""

import numpy as np
import pytest
from batches import numpy_of, random_rollout

from distributed_ac.learning.advantages import gae, vtrace

TOL = {"rtol": 1e-5, "atol": 1e-5}  # float32 sums of up to T terms of order 1


# --- the explicit sums ----------------------------------------------------------------


def last_step_of_sum(t, n, terminated, truncated, mask):
    """The last step whose term enters a sum that starts at step t: the first step
    u >= t that ends the episode, else the step before the first reset step after t,
    else the rollout's last step."""
    T = terminated.shape[0]
    for u in range(t, T):
        if u > t and mask[u, n] == 0:
            return u - 1
        if terminated[u, n] or truncated[u, n]:
            return u
    return T - 1


def td_error(t, n, rewards, values, terminated, gamma):
    """r_t + gamma V(x_{t+1}) - V(x_t), with no V(x_{t+1}) after a termination."""
    bootstrap = 0.0 if terminated[t, n] else gamma * values[t + 1, n]
    return rewards[t, n] + bootstrap - values[t, n]


def gae_by_sums(rewards, values, terminated, truncated, mask, gamma, lam):
    T, N = rewards.shape
    advantages = np.zeros((T, N))
    for n in range(N):
        for t in range(T):
            if mask[t, n] == 0:
                continue
            end = last_step_of_sum(t, n, terminated, truncated, mask)
            advantages[t, n] = sum((gamma * lam) ** (u - t)
                                   * td_error(u, n, rewards, values, terminated, gamma)
                                   for u in range(t, end + 1))
    targets = np.where(mask == 1, advantages + values[:-1], 0.0)
    return targets, advantages


def vs_by_sum(s, n, rho, c, rewards, values, terminated, truncated, mask, gamma):
    """v_s, unmasked: V(x_s) plus the discounted, trace-weighted TD errors to the end
    of the sum (V(x_s) alone on a reset step, which starts no sum)."""
    if mask[s, n] == 0:
        return float(values[s, n])
    end = last_step_of_sum(s, n, terminated, truncated, mask)
    total = float(values[s, n])
    for t in range(s, end + 1):
        trace = np.prod([c[i, n] for i in range(s, t)])  # 1 for t = s
        total += (gamma ** (t - s) * trace * rho[t, n]
                  * td_error(t, n, rewards, values, terminated, gamma))
    return total


def vtrace_by_sums(blogp, tlogp, rewards, values, terminated, truncated, mask, gamma, lam,
                   rho_bar, c_bar, pg_bootstrap):
    T, N = rewards.shape
    ratio = np.exp(tlogp.astype(np.float64) - blogp)
    rho, c = np.minimum(rho_bar, ratio), lam * np.minimum(c_bar, ratio)
    args = (rho, c, rewards, values, terminated, truncated, mask, gamma)
    vs, pg = np.zeros((T, N)), np.zeros((T, N))
    for n in range(N):
        for s in range(T):
            if mask[s, n] == 0:
                continue
            vs[s, n] = vs_by_sum(s, n, *args)
            ended = terminated[s, n] or truncated[s, n]
            if ended or s == T - 1:  # nothing of the episode follows: V(x_{s+1})
                next_value = values[s + 1, n]
            else:
                v_next = vs_by_sum(s + 1, n, *args)
                mix = lam if pg_bootstrap == "lambda" else 1.0
                next_value = mix * v_next + (1 - mix) * values[s + 1, n]
            bootstrap = 0.0 if terminated[s, n] else gamma * next_value
            pg[s, n] = rho[s, n] * (rewards[s, n] + bootstrap - values[s, n])
    return vs, pg


# --- inputs ---------------------------------------------------------------------------


def rollout(seed):
    """Random [T, N] inputs with NEXT_STEP-consistent flags: after a terminated or
    truncated step comes a mask-0 reset step (reward 0, flags 0); some sub-envs open the
    rollout with one (their episode ended in the previous rollout)."""
    batch = random_rollout(seed, T=10, N=6, p_done=0.25, p_start_reset=0.25)
    _, _, terminated, truncated, mask = batch
    assert terminated.any() and truncated.any() and not mask.all()  # every case is in
    return batch


def straddling_logps(seed, shape, rho_bar, c_bar):
    """Behaviour and target log-probs whose ratios pi/mu spread over [0.3, 3]: some
    below c_bar, some between c_bar and rho_bar, some above rho_bar."""
    rng = np.random.default_rng(seed + 1)
    blogp = rng.uniform(-2.0, -0.2, shape).astype(np.float32)
    tlogp = (blogp + rng.uniform(np.log(0.3), np.log(3.0), shape)).astype(np.float32)
    ratio = np.exp(tlogp - blogp)
    assert (ratio < c_bar).any() and (ratio > rho_bar).any()
    if c_bar < rho_bar:
        assert ((ratio > c_bar) & (ratio < rho_bar)).any()
    return blogp, tlogp


# --- GAE ------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma, lam", [(0.97, 0.9), (0.9, 0.0), (0.95, 1.0), (0.0, 0.8),
                                        (1.0, 1.0)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_equals_the_explicit_sum_of_discounted_td_errors(seed, gamma, lam):
    batch = rollout(seed)
    targets, advantages = numpy_of(*gae(*batch, gamma, lam))
    want_targets, want_advantages = gae_by_sums(*batch, gamma, lam)
    np.testing.assert_allclose(advantages, want_advantages, **TOL)
    np.testing.assert_allclose(targets, want_targets, **TOL)


def assert_both_match_the_sums(batch, seed):
    for got, want in zip(numpy_of(*gae(*batch, 0.9, 0.95)), gae_by_sums(*batch, 0.9, 0.95)):
        np.testing.assert_allclose(got, want, **TOL)
    blogp, tlogp = straddling_logps(seed, batch[0].shape, 1.0, 1.0)
    for pg_bootstrap in ("vs", "lambda"):
        got = numpy_of(*vtrace(blogp, tlogp, *batch, 0.9, lam=0.95, pg_bootstrap=pg_bootstrap))
        want = vtrace_by_sums(blogp, tlogp, *batch, 0.9, 0.95, 1.0, 1.0, pg_bootstrap)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, **TOL)


def test_a_reset_step_that_follows_no_done_still_cuts_the_sums():
    """The docstring promises that a mask-0 step never feeds an earlier step, even with
    flags a caller got wrong (a reset step after a step that did not end)."""
    rewards, values, terminated, truncated, mask = rollout(3)
    mask[5, :] = 0  # whatever step 4 was
    rewards[5, :] = 100.0
    assert_both_match_the_sums((rewards, values, terminated, truncated, mask), 3)


def test_an_episode_end_cuts_the_sums_even_with_no_reset_step_after_it():
    """With NEXT_STEP flags the reset step after a done would cut the sums by itself;
    here the next episode starts at once (mask all ones, as a SAME_STEP env would give),
    so only the flags themselves can stop a truncated or terminated episode's sum."""
    rewards, values, terminated, truncated, _ = rollout(5)
    ones = np.ones_like(rewards)
    rewards = np.where(rewards == 0, 5.0, rewards).astype(np.float32)  # no silent steps
    assert_both_match_the_sums((rewards, values, terminated, truncated, ones), 5)


# --- V-trace --------------------------------------------------------------------------


@pytest.mark.parametrize("pg_bootstrap", ["vs", "lambda"])
@pytest.mark.parametrize("gamma, lam, rho_bar, c_bar", [
    (0.95, 1.0, 1.0, 1.0),  # the paper's default
    (0.95, 0.0, 1.0, 1.0),  # no traces: one-step targets
    (0.9, 0.8, 1.5, 0.7),  # rho and c clipped at different levels
    (0.99, 0.95, 2.0, 2.0),
    (0.0, 0.9, 1.0, 0.5),  # no discount: v_s = V_s + rho_s (r_s - V_s)
])
@pytest.mark.parametrize("seed", [0, 1])
def test_vtrace_equals_the_explicit_sum_with_clipped_importance_weights(
        seed, gamma, lam, rho_bar, c_bar, pg_bootstrap):
    batch = rollout(seed)
    blogp, tlogp = straddling_logps(seed, batch[0].shape, rho_bar, c_bar)
    vs, pg = numpy_of(*vtrace(blogp, tlogp, *batch, gamma, lam=lam, rho_bar=rho_bar,
                              c_bar=c_bar, pg_bootstrap=pg_bootstrap))
    want_vs, want_pg = vtrace_by_sums(blogp, tlogp, *batch, gamma, lam, rho_bar, c_bar,
                                      pg_bootstrap)
    np.testing.assert_allclose(vs, want_vs, **TOL)
    np.testing.assert_allclose(pg, want_pg, **TOL)


def test_vtrace_with_no_discount_is_one_weighted_td_step():
    """gamma = 0: v_s = V_s + rho_s (r_s - V_s) and pg_s = rho_s (r_s - V_s), whatever the
    traces and flags, written without any sum."""
    rewards, values, _, _, mask = batch = rollout(4)
    blogp, tlogp = straddling_logps(4, rewards.shape, 1.0, 1.0)
    rho = np.minimum(1.0, np.exp(tlogp - blogp))
    vs, pg = numpy_of(*vtrace(blogp, tlogp, *batch, 0.0, lam=0.9))
    np.testing.assert_allclose(vs, (values[:-1] + rho * (rewards - values[:-1])) * mask, **TOL)
    np.testing.assert_allclose(pg, rho * (rewards - values[:-1]) * mask, **TOL)


def one_episode_end(flag):
    """One sub-env, 5 steps: step 2 ends the episode by `flag`, step 3 is its reset step
    (mask 0), step 4 starts the next episode."""
    rewards = np.array([[1.0], [2.0], [4.0], [0.0], [3.0]], np.float32)
    values = np.array([[10.0], [20.0], [30.0], [40.0], [50.0], [60.0]], np.float32)
    terminated, truncated = np.zeros((5, 1), np.float32), np.zeros((5, 1), np.float32)
    {"terminated": terminated, "truncated": truncated}[flag][2] = 1.0
    mask = np.array([[1.0], [1.0], [1.0], [0.0], [1.0]], np.float32)
    return rewards, values, terminated, truncated, mask


LOGPS = (np.log(np.array([[0.5], [0.4], [0.2], [0.3], [0.5]], np.float32)),  # mu
         np.log(np.array([[0.9], [0.2], [0.5], [0.3], [0.25]], np.float32)))  # pi


def test_a_truncated_step_bootstraps_from_the_final_observation_and_a_terminated_does_not():
    """Same rollout, episode cut at step 2 by a time limit or by a terminal state: the
    difference is exactly the bootstrap term rho_2 gamma V(x_3), carried back to steps 0
    and 1 by the discount and the traces c_0, c_1 (and nothing from step 3 on)."""
    gamma, lam = 0.5, 0.9
    rho = np.minimum(1.0, np.exp(LOGPS[1] - LOGPS[0]))[:, 0]  # [1, 0.5, 1, 1, 0.5]
    c = lam * rho
    out = {flag: numpy_of(*vtrace(*LOGPS, *one_episode_end(flag), gamma, lam=lam))
           for flag in ("terminated", "truncated")}
    bootstrap = rho[2] * gamma * 40.0  # values[3]: V of the real final observation
    carried = np.array([gamma ** 2 * c[0] * c[1], gamma * c[1], 1.0]) * bootstrap
    np.testing.assert_allclose(out["truncated"][0][:3, 0] - out["terminated"][0][:3, 0],
                               carried, **TOL)
    np.testing.assert_allclose(out["truncated"][0][3:], out["terminated"][0][3:], **TOL)
    # the actor's advantage of the ending step: rho_2 (r_2 + gamma V(x_3) - V(x_2)), or
    # without the V(x_3) term
    assert out["truncated"][1][2, 0] == pytest.approx(rho[2] * (4.0 + gamma * 40.0 - 30.0))
    assert out["terminated"][1][2, 0] == pytest.approx(rho[2] * (4.0 - 30.0))
    for flag, outputs in out.items():  # and both match the explicit sums
        want = vtrace_by_sums(*LOGPS, *one_episode_end(flag), gamma, lam, 1.0, 1.0, "vs")
        for got, w in zip(outputs, want):
            np.testing.assert_allclose(got, w, **TOL)


@pytest.mark.parametrize("flag", ["terminated", "truncated"])
def test_a_reset_step_right_after_a_done_is_zero_and_nothing_of_it_reaches_earlier_steps(flag):
    """Under NEXT_STEP autoreset the reset step's reward, its log-probs (the ignored
    action) and the value of the reset observation it returned belong to no episode of
    the steps before it."""
    batch = one_episode_end(flag)
    vs, pg = numpy_of(*vtrace(*LOGPS, *batch, 0.9, lam=1.0))
    targets, adv = numpy_of(*gae(*batch, 0.9, 1.0))
    assert vs[3, 0] == pg[3, 0] == targets[3, 0] == adv[3, 0] == 0.0
    rewards, values = batch[0].copy(), batch[1].copy()
    rewards[3] = 1e3
    values[4] = -1e3  # V(reset observation)
    blogp, tlogp = LOGPS[0].copy(), LOGPS[1].copy()
    tlogp[3] = 0.0  # ratio 3.3 at the reset step
    poked = (rewards, values, *batch[2:])
    vs2, pg2 = numpy_of(*vtrace(blogp, tlogp, *poked, 0.9, lam=1.0))
    targets2, _ = numpy_of(*gae(*poked, 0.9, 1.0))
    np.testing.assert_array_equal(vs2[:4], vs[:4])
    np.testing.assert_array_equal(pg2[:4], pg[:4])
    np.testing.assert_array_equal(targets2[:4], targets[:4])
    # the episode that starts at step 4 is bootstrapped from values[5] as usual
    rho4 = min(1.0, 0.25 / 0.5)
    assert vs[4, 0] == pytest.approx(50.0 + rho4 * (3.0 + 0.9 * 60.0 - 50.0))
