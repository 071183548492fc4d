"""policy_loss "clip": which targets and advantages the clipped update trains on.

Async mode with off_policy_correction "vtrace" must correct the lag between the policy
that collected a batch (behaviour log-probs in the batch) and the learner's policy at
the start of the update (pi_old, before any of its minibatch steps): the critic's
targets are V-trace's vs and the actor's advantages V-trace's, computed with pi_old's
log-probs. GAE would ignore the lag; V-trace with the behaviour's own log-probs as the
target policy would ignore it too.

With one pass of one minibatch the step's metrics are exact functions of them: the
critic loss is 0.5 * masked_mean((V(s) - targets)^2) with V before the update, and at
the first minibatch the surrogate's ratio pi_theta / pi_old is 1, so (advantage
normalisation off, no entropy bonus) the actor loss is -masked_mean(advantages).
"""

import numpy as np
import pytest

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.learning import advantages
from distributed_ac.learning.learner import Learner


def masked_mean(x, mask):
    return float((x * mask).sum() / max(mask.sum(), 1.0))


def log_softmax_of_taken(logits, actions):
    """log pi(a|s) from raw logits, in float64: logits_a - log sum_b exp(logits_b)."""
    logits = logits.astype(np.float64)
    top = logits.max(axis=1, keepdims=True)
    log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    return logits[np.arange(len(actions)), actions] - log_z


def stale_batch_and_learner(**fields):
    """A batch collected by policy version 0, and a learner that has since taken three
    updates on other batches with a large actor step, so pi_old is far from the policy
    that collected it (importance ratios well away from 1 on both sides)."""
    cfg = Config(envs_per_worker=8, rollout_length=32, total_env_steps=10_000,
                 policy_loss="clip", update_epochs=1, minibatch_size=10**6,
                 normalize_advantages=False, entropy_coef=0.0, actor_lr=0.05,
                 hidden_sizes=(16,), **fields)
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    stale = worker.collect(learner.weights())
    for _ in range(3):
        learner.step(worker.collect(learner.weights()))
    assert learner.policy_version == 3 and stale.policy_version == 0
    # episodes end inside the batch: terminations and masked reset steps take part
    assert stale.terminated.any() and not stale.mask.all()
    return cfg, learner, stale


def readings(cfg, batch, pi_old_logp):
    """(targets, advantages) of every way the update could read this batch."""
    rewards = batch.rewards * cfg.reward_scale
    flags = (batch.values, batch.terminated, batch.truncated, batch.mask)
    mu = batch.behaviour_logp

    def vtrace(target_logp):
        return advantages.vtrace(mu, target_logp, rewards, *flags, cfg.gamma, cfg.gae_lambda,
                                 cfg.rho_bar, cfg.c_bar, cfg.vtrace_pg_bootstrap)

    gae_targets, gae_adv = advantages.gae(rewards, *flags, cfg.gamma, cfg.gae_lambda)
    weights = advantages.truncated_importance_weights(mu, pi_old_logp, cfg.rho_bar)
    out = {"vtrace with pi_old": vtrace(pi_old_logp),
           "vtrace with no lag (mu as target)": vtrace(mu),
           "gae": (gae_targets, gae_adv),
           "gae with truncated IS": (gae_targets, gae_adv * weights)}
    return {k: (np.asarray(t), np.asarray(a)) for k, (t, a) in out.items()}


@pytest.mark.parametrize("mode, correction, applied", [
    ("async", "vtrace", "vtrace with pi_old"),
    ("async", "truncated_is", "gae with truncated IS"),
    ("async", "none", "gae"),
    ("sync", "vtrace", "gae"),  # sync batches are on-policy by construction: no correction
])
def test_the_clipped_update_trains_on_the_configured_correction_against_pi_old(
        mode, correction, applied):
    cfg, learner, batch = stale_batch_and_learner(mode=mode, off_policy_correction=correction)
    T, N = batch.rewards.shape
    obs = batch.obs.reshape(T * N, -1)
    logits = learner.nets.actor(obs).numpy()
    pi_old = log_softmax_of_taken(logits, batch.actions.reshape(-1)).reshape(T, N)
    v = learner.nets.critic(obs).numpy().reshape(T, N).astype(np.float64)
    log_ratio = (pi_old - batch.behaviour_logp) * batch.mask
    assert log_ratio.max() > 0.05 and log_ratio.min() < -0.05  # ratios above and below 1

    expected = {}
    for name, (targets, adv) in readings(cfg, batch, pi_old.astype(np.float32)).items():
        expected[name] = (0.5 * masked_mean((v - targets) ** 2, batch.mask),
                          -masked_mean(adv, batch.mask))

    metrics = learner.step(batch)
    got = (metrics["critic_loss"], metrics["actor_loss"])
    # the importance ratio the learner reports is pi_old / mu: it used the same pi_old
    assert metrics["importance_ratio"] == pytest.approx(
        masked_mean(np.exp(log_ratio), batch.mask), rel=1e-4)
    assert metrics["clip_fraction"] == 0.0  # one minibatch: the ratio was exactly 1
    np.testing.assert_allclose(got, expected[applied], rtol=1e-4, atol=1e-6)
    for other, value in expected.items():  # the batch tells every other reading apart
        if other != applied and not np.allclose(value, expected[applied], rtol=1e-2):
            assert not np.allclose(got, value, rtol=1e-2), other
    # and V-trace's own readings differ here, so the vtrace case checks something
    assert not np.allclose(expected["vtrace with pi_old"], expected["gae"], rtol=1e-2)
    assert not np.allclose(expected["vtrace with pi_old"],
                           expected["vtrace with no lag (mu as target)"], rtol=1e-2)

