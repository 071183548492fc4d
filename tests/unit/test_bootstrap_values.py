"""Which values an async pg update bootstraps from (bootstrap_values): the learner's
V_target at the update or the batch's own, as old as the batch; checked against V-trace
computed on NumPy arrays with each."""

import dataclasses

import numpy as np
import pytest
from batches import expected_targets, pg_step_losses

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.plan import make_plan
from distributed_ac.config.schema import Config
from distributed_ac.learning.learner import Learner


def step_losses_with_values(learner, batch, values):
    """(critic loss, actor loss) the pg step should report on `batch` if it bootstraps
    from `values`, from V-trace on NumPy arrays and the networks before the step."""
    cfg, obs = learner.cfg, batch.obs.reshape(len(batch.obs) * batch.obs.shape[1], -1)
    shape = batch.rewards.shape
    v = learner.nets.critic(obs).numpy().reshape(shape)
    logp = learner.objective.policy_terms(learner.nets.actor(obs), batch.actions.reshape(-1),
                                          shape)[0].numpy()
    targets, adv = expected_targets("vtrace", cfg, dataclasses.replace(batch, values=values),
                                    logp, cfg.reward_scale)
    return pg_step_losses(v, targets, logp, adv, batch.mask)


@pytest.mark.parametrize("sync_every", [1, 3])
@pytest.mark.parametrize("choice, joined, expected", [
    ("learner", 2, "learner"), ("worker", 1, "worker"),
    ("auto", 1, "learner"),  # an update joins 1 of 2 workers' batches: lag over 1
    ("auto", 2, "worker"),  # one from each: lag 1
])
def test_async_pg_bootstraps_from_the_learner_s_v_target_not_the_batch_s_stale_values(
        sync_every, choice, joined, expected):
    """A batch made four updates ago carries its worker's V_target values. From the
    learner's, the step bootstraps from V_target(obs) now for the T steps (at
    sync_every 3, V_target was synced at the third update and V moved at the fourth: its
    own pass), and from the batch's value after the last step; from the worker's, from
    the batch's values. auto picks by the run plan the learner is given."""
    cfg = Config(envs_per_worker=8, rollout_length=32, total_env_steps=10_000, mode="async",
                 reward_scale=0.1, normalize_advantages=False, critic_lr=0.05,
                 target_sync_every=sync_every, bootstrap_values=choice,
                 batches_per_update=joined)
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    learner.plan(make_plan(cfg, 2))
    assert learner.objective.bootstrap_values_from == expected
    stale = worker.collect(learner.weights())
    for _ in range(4):
        learner.step(worker.collect(learner.weights()))
    obs = stale.obs.reshape(-1, worker.space.obs_dim)
    now = learner.nets.v_target(obs).numpy().reshape(stale.rewards.shape)
    v = learner.nets.critic(obs).numpy().reshape(now.shape)
    assert not np.allclose(now, stale.values[:-1], atol=1e-3)  # the critic moved
    assert np.allclose(now, v) == (sync_every == 1)  # V_target = V only when synced
    current = np.concatenate([now, stale.values[-1:]])
    want = {"learner": step_losses_with_values(learner, stale, current),
            "worker": step_losses_with_values(learner, stale, stale.values)}
    assert not np.allclose(want["learner"], want["worker"], rtol=1e-2)
    metrics = learner.step(stale)
    np.testing.assert_allclose((metrics["critic_loss"], metrics["actor_loss"]),
                               want[expected], rtol=1e-4, atol=1e-6)
