"""An update is all or nothing: the weights workers get always match the version they
carry, however many optimizer steps the update takes."""

import numpy as np
import tensorflow as tf

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.learning import clipped
from distributed_ac.learning.learner import Learner


def everything(learner) -> list[np.ndarray]:
    return [v.numpy().copy() for v in (*learner.nets.actor.trainable_variables,
                                       *learner.nets.critic.trainable_variables,
                                       *learner.actor_opt.variables,
                                       *learner.critic_opt.variables)]


def test_a_clipped_update_whose_third_minibatch_is_not_finite_moves_nothing(monkeypatch):
    """The third of an update's 16 minibatch steps reports a non-finite loss (a stand-in
    for a NaN gradient) and takes no step; the two before it took theirs. The update is
    skipped as a whole: every weight, Adam slot and step count is what it was. Before,
    the first two steps stayed applied while the version did not move."""
    cfg = Config(policy_loss="clip", update_epochs=2, minibatch_size=16, num_envs=8,
                 rollout_length=16, hidden_sizes=(16,), total_env_steps=10_000, mode="sync")
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    calls = tf.Variable(0)
    poison = tf.Variable(False)
    real_step = learner._minibatch_step

    def third_fails(**minibatch):
        calls.assign_add(1)
        nan = (tf.fill([len(clipped.METRICS)], np.nan), tf.constant(False))
        return tf.cond(tf.logical_and(poison, tf.equal(calls % 16, 3)), lambda: nan,
                       lambda: real_step(**minibatch))

    monkeypatch.setattr(learner, "_minibatch_step", third_fails)
    learner.step(worker.collect(learner.weights()))
    before, version = everything(learner), learner.policy_version
    batch = worker.collect(learner.weights())
    poison.assign(True)
    metrics = learner.step(batch)
    assert metrics["applied"] == 0.0 and learner.policy_version == version
    assert all(np.array_equal(a, b) for a, b in zip(before, everything(learner)))
    poison.assign(False)  # the same batch, every step finite: applied
    assert learner.step(batch)["applied"] == 1.0 and learner.policy_version == version + 1
    assert int(learner.actor_opt.iterations) == 32
