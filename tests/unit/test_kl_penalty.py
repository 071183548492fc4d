"""The adaptive KL penalty (policy_loss clip, kl_coef > 0), through a real Learner
stepped on a batch: after each applied update its weight is x1.5 when the update's mean
approx_kl exceeded 2 x kl_target, x0.5 when it was below kl_target / 2, else unchanged;
the step reports the weight it applied. With kl_coef 0 the learner has no weight, no
metric and no checkpoint entry for it. The loss term itself is in test_losses.py."""

import numpy as np
import pytest

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import ConfigError
from distributed_ac.learning.learner import Learner

CLIP = dict(envs_per_worker=4, rollout_length=16, total_env_steps=10_000, policy_loss="clip",
            update_epochs=2, minibatch_size=32, hidden_sizes=(16,), actor_lr=0.01)


@pytest.fixture(scope="module")
def batch():
    worker = RolloutWorker(Config(**CLIP), limit_cpus=False)
    return worker.space, worker.collect(Learner(Config(**CLIP), worker.space).weights())


def stepped(batch, **fields):
    """A learner after one update on the batch, and that update's metrics."""
    space, b = batch
    learner = Learner(Config(**CLIP, **fields), space)
    return learner, learner.step(b)


@pytest.fixture(scope="module")
def update_kl(batch):
    """The mean approx_kl of the first update at kl_coef 0.2: every learner below takes
    the same update (the target only decides the weight afterwards)."""
    _, metrics = stepped(batch, kl_coef=0.2)
    assert metrics["approx_kl"] > 0
    return metrics["approx_kl"]


@pytest.mark.parametrize("target_over_kl, factor", [
    (0.25, 1.5),  # the update moved the policy 4x the target: the penalty rises
    (1.0, 1.0),   # within [target / 2, 2 target]: unchanged
    (4.0, 0.5),   # a quarter of the target: the penalty falls
])
def test_the_weight_adapts_once_per_update_from_its_mean_kl(batch, update_kl, target_over_kl,
                                                             factor):
    learner, metrics = stepped(batch, kl_coef=0.2, kl_target=update_kl * target_over_kl)
    assert metrics["approx_kl"] == pytest.approx(update_kl, rel=1e-4)
    assert metrics["kl_coef"] == pytest.approx(0.2)  # the weight this update applied
    assert float(learner.objective.kl_coef.numpy()) == pytest.approx(0.2 * factor)
    assert learner.step(batch[1])["kl_coef"] == pytest.approx(0.2 * factor)  # the next one's


def test_the_penalty_changes_the_update_and_is_absent_at_kl_coef_zero(batch):
    off, off_metrics = stepped(batch)
    on, _ = stepped(batch, kl_coef=5.0)
    assert off.objective.kl_coef is None and "kl_coef" not in off_metrics
    assert "kl_coef" not in off.checkpoint_objects()
    assert on.checkpoint_objects()["kl_coef"] is on.objective.kl_coef
    moved = [not np.array_equal(a.numpy(), b.numpy())
             for a, b in zip(off.nets.actor.variables, on.nets.actor.variables)]
    assert any(moved)


@pytest.mark.parametrize("fields, message", [
    (dict(kl_coef=-0.1), "kl_coef must be >= 0"),
    (dict(kl_target=0.0), "kl_target must be > 0"),
])
def test_a_negative_weight_or_a_target_of_zero_is_refused(fields, message):
    with pytest.raises(ConfigError, match=message):
        Config(**fields)
