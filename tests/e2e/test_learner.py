"""The Learner, stepped from real worker batches with no Ray: V_target, two optimizers,
per-network clipping, the shared trunk, the no-gradient check, and the targets and
advantages each off-policy correction and reward_scale give."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf
from batches import expected_targets, pg_step_losses

from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.plan import make_plan
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import NoGradientError, NonFiniteLossError
from distributed_ac.envs.vector import probe_space
from distributed_ac.learning.learner import Learner
from distributed_ac.learning.tf_runtime import pick_device


def setup(**kw):
    cfg = Config(envs_per_worker=8, rollout_length=8, total_env_steps=10_000, **kw)
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    return cfg, worker, learner


def arrays(variables):
    return [v.numpy().copy() for v in variables]


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_v_target_equals_v_at_start_and_after_each_sync_and_differs_between():
    cfg, worker, learner = setup(target_sync_every=3)
    critic = lambda: arrays(learner.nets.path("critic"))  # noqa: E731
    target = lambda: arrays(learner.nets.path("v_target"))  # noqa: E731
    assert same(critic(), target())
    for update in range(1, 7):
        learner.step(worker.collect(learner.weights()))
        assert same(critic(), target()) == (update % 3 == 0), update
    assert learner.target_version == 2


def test_polyak_tau_moves_v_target_part_way():
    cfg, worker, learner = setup(target_tau=0.25)
    before = arrays(learner.nets.path("v_target"))
    learner.step(worker.collect(learner.weights()))
    critic = arrays(learner.nets.path("critic"))
    after = arrays(learner.nets.path("v_target"))
    for b, c, a in zip(before, critic, after):
        np.testing.assert_allclose(a, 0.25 * c + 0.75 * b, rtol=1e-5, atol=1e-7)


def test_shared_trunk_is_the_same_variables_in_actor_and_critic():
    _, _, learner = setup(topology="shared")
    nets = learner.nets
    actor_ids = {id(v) for v in nets.actor.trainable_variables}
    critic_ids = {id(v) for v in nets.critic.trainable_variables}
    trunk_ids = {id(v) for v in nets.parts["actor.encoder"].trainable_variables}
    assert nets.parts["critic.encoder"] is nets.parts["actor.encoder"]
    assert trunk_ids and trunk_ids <= actor_ids & critic_ids
    # separate topology: nothing in common
    _, _, sep = setup(topology="separate")
    assert not ({id(v) for v in sep.nets.actor.trainable_variables}
                & {id(v) for v in sep.nets.critic.trainable_variables})


def test_shared_trunk_moves_with_one_update_and_v_target_keeps_its_own_copy():
    _, worker, learner = setup(topology="shared", target_sync_every=100)
    trunk = learner.nets.parts["actor.encoder"].bundle_variables
    before = arrays(trunk)
    learner.step(worker.collect(learner.weights()))
    assert not same(before, arrays(trunk))
    target_trunk = arrays(learner.nets.path("v_target")[: len(trunk)])
    assert same(before, target_trunk)


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("topology", ["shared", "separate"])
def test_one_pass_heads_equal_the_two_models_and_run_a_shared_trunk_once(env, topology):
    _, worker, learner = setup(env=env, topology=topology)
    nets, batch = learner.nets, worker.collect(learner.weights())
    obs = tf.constant(batch.obs.reshape(-1, worker.space.obs_dim))
    calls = []
    trunk = nets.parts["actor.encoder"]
    plain_call = trunk.call
    trunk.call = lambda *a, **k: calls.append(1) or plain_call(*a, **k)
    with tf.GradientTape(persistent=True) as tape:
        pi, v = nets.actor_and_value(obs)
        pi_ref, v_ref = nets.actor(obs), nets.critic(obs)
        one = tf.reduce_sum(v) + sum(tf.reduce_sum(t ** 2) for t in tf.nest.flatten(pi))
        two = tf.reduce_sum(v_ref) + sum(tf.reduce_sum(t ** 2) for t in tf.nest.flatten(pi_ref))
    # one pass, then the two models' passes: a shared trunk runs 1 + 2 times
    assert len(calls) == (3 if topology == "shared" else 2)
    for a, b in zip(tf.nest.flatten(pi) + [v], tf.nest.flatten(pi_ref) + [v_ref]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)
    variables = nets.actor_variables + nets.critic_variables
    for g1, g2 in zip(tape.gradient(one, variables), tape.gradient(two, variables)):
        np.testing.assert_allclose(g1.numpy(), g2.numpy(), rtol=1e-5, atol=1e-5)


def test_variable_without_gradient_fails_at_first_update_naming_it():
    _, worker, learner = setup()
    batch = worker.collect(learner.weights())
    orphan = keras.layers.Dense(3, name="orphan_layer")
    orphan.build((None, 4))
    orphan.bundle_variables = orphan.trainable_variables
    # in the actor optimizer's group (a feed-forward model has no core, so nothing reads it)
    learner.nets.parts["actor.core"] = orphan
    before = arrays(learner.nets.actor.trainable_variables)
    with pytest.raises(NoGradientError, match="actor loss.*orphan_layer"):
        learner.step(batch)
    assert same(before, arrays(learner.nets.actor.trainable_variables))
    assert int(learner.actor_opt.iterations) == 0


def test_two_optimizers_follow_their_own_exponential_decay():
    _, worker, learner = setup(actor_lr=1e-3, actor_lr_decay_steps=4, actor_lr_decay_rate=0.5,
                               critic_lr=3e-3, critic_lr_decay_steps=10, critic_lr_decay_rate=0.9)
    assert learner.actor_opt is not learner.critic_opt
    for _ in range(6):
        metrics = learner.step(worker.collect(learner.weights()))
    k = 6
    assert int(learner.actor_opt.iterations) == int(learner.critic_opt.iterations) == k
    # the logged rate is the one the k-th update applied: the schedule at step k - 1
    np.testing.assert_allclose(metrics["learning_rate_actor"], 1e-3 * 0.5 ** ((k - 1) / 4), rtol=1e-5)
    np.testing.assert_allclose(metrics["learning_rate_critic"], 3e-3 * 0.9 ** ((k - 1) / 10),
                               rtol=1e-5)
    # and the first update logs the initial rate
    _, worker, fresh = setup(actor_lr=1e-3, actor_lr_decay_steps=4, actor_lr_decay_rate=0.5)
    assert fresh.step(worker.collect(fresh.weights()))["learning_rate_actor"] == pytest.approx(1e-3)


def test_an_auto_schedule_spans_the_planned_updates_and_a_set_one_keeps_its_span():
    """decay_steps 0: the rate falls by decay_rate once over the run's planned updates
    (Trainer plans them from the budget), so a long run ends at rate x decay_rate
    instead of freezing; a set decay_steps is left alone."""
    _, worker, learner = setup(actor_lr=1e-3, actor_lr_decay_steps=0, actor_lr_decay_rate=0.5,
                               critic_lr=2e-3, critic_lr_decay_steps=7, critic_lr_decay_rate=0.5)
    assert learner.plan(make_plan(learner.cfg, 1)) == {"actor": 157, "critic": 7}
    six = dataclasses.replace(make_plan(learner.cfg, 1), updates=6)
    assert learner.plan(six) == {"actor": 6, "critic": 7}
    for _ in range(7):
        metrics = learner.step(worker.collect(learner.weights()))
    # the 7th update applied the schedule at step 6: the planned end for the actor
    np.testing.assert_allclose(metrics["learning_rate_actor"], 1e-3 * 0.5, rtol=1e-5)
    np.testing.assert_allclose(metrics["learning_rate_critic"], 2e-3 * 0.5 ** (6 / 7), rtol=1e-5)


@pytest.mark.parametrize("tiny", ["actor", "critic"])
def test_each_network_is_clipped_by_its_own_global_norm(tiny):
    # A clip of 1e-9 shrinks that network's Adam step ~1e4-fold (the step is lr * g / (|g| + eps)
    # with eps = 1e-5); the other network, clipped at 1e3, takes a full step.
    clips = {"max_grad_norm_actor": 1e3, "max_grad_norm_critic": 1e3, f"max_grad_norm_{tiny}": 1e-9}
    _, worker, learner = setup(actor_lr=1e-2, critic_lr=1e-2, **clips)
    groups = {"actor": learner.nets.actor_variables, "critic": learner.nets.critic_variables}
    before = {k: arrays(v) for k, v in groups.items()}
    metrics = learner.step(worker.collect(learner.weights()))
    moved = {k: max(np.abs(a - b).max() for a, b in zip(arrays(groups[k]), before[k])) for k in groups}
    other = "critic" if tiny == "actor" else "actor"
    assert moved[tiny] < 1e-5 and moved[other] > 1e-3, moved
    assert metrics[f"grad_norm_{tiny}"] > 1e-9  # the pre-clip norm is reported


def test_repeated_updates_on_one_batch_fit_the_critic():
    _, worker, learner = setup(critic_lr=1e-2)
    batch = worker.collect(learner.weights())
    first = learner.step(batch)["critic_loss"]
    for _ in range(30):
        last = learner.step(batch)["critic_loss"]
    assert last < 0.5 * first


def test_non_finite_loss_skips_the_update_and_leaves_all_state_untouched():
    cfg, worker, learner = setup(max_nonfinite_updates=3)
    learner.step(worker.collect(learner.weights()))
    everything = lambda: arrays(learner.nets.actor.trainable_variables  # noqa: E731
                                + learner.nets.critic.trainable_variables
                                + learner.actor_opt.variables + learner.critic_opt.variables)
    before, version = everything(), learner.policy_version
    bad = worker.collect(learner.weights())
    bad.rewards[2, 1] = np.nan  # poisons the returns, hence the critic loss
    metrics = learner.step(bad)
    assert metrics["applied"] == 0.0
    assert same(before, everything()) and learner.policy_version == version
    assert learner.skipped_updates == 1
    learner.step(worker.collect(learner.weights()))  # a good batch resets the streak
    assert learner.policy_version == version + 1


def test_consecutive_non_finite_updates_stop_the_run():
    _, worker, learner = setup(max_nonfinite_updates=2)
    bad = worker.collect(learner.weights())
    bad.obs[0, 0, 0] = np.inf
    learner.step(bad)
    with pytest.raises(NonFiniteLossError, match="2 updates in a row"):
        learner.step(bad)


# ---- targets and advantages through the real step ---------------------------------------
# The step returns metrics only, but two of them are exact functions of what _targets
# gave it: critic_loss = 0.5 * masked_mean((V(s) - targets)^2) and, with advantage
# normalisation off, actor_loss = -masked_mean(log pi(a|s) * advantages). So each case
# steps the compiled graph on a real batch and checks both against advantages.gae /
# truncated_importance_weights / vtrace called directly on the same arrays
# (batches.expected_targets).

def lagged_batch(worker, learner):
    """A real batch re-labelled as if an older policy had made it: behaviour log-probs
    moved by up to 0.5 either way, so the importance ratios spread over ~[0.6, 1.6] and
    rho_bar = 1 clips about half of them (on-policy they would all be 1 and the three
    corrections would agree). Also returns the learner's own log-probs of the actions
    (the worker's NumPy twin of its policy computed them)."""
    batch = worker.collect(learner.weights())
    logp = batch.behaviour_logp.copy()
    shift = np.random.default_rng(1).uniform(-0.5, 0.5, logp.shape).astype(np.float32)
    batch.behaviour_logp = logp + shift
    return batch, logp


@pytest.mark.parametrize("mode, correction, applied", [
    ("async", "vtrace", "vtrace"),
    ("async", "truncated_is", "truncated_is"),
    ("async", "none", "none"),
    ("sync", "vtrace", "none"),  # sync batches are on-policy: no correction is applied
])
def test_learner_targets_and_advantages_are_the_configured_correction_on_scaled_rewards(
        mode, correction, applied):
    # 32 steps of CartPole: episodes end inside the batch (terminations, masked reset steps)
    cfg = Config(envs_per_worker=8, rollout_length=32, total_env_steps=10_000, mode=mode,
                 off_policy_correction=correction, reward_scale=0.1, normalize_advantages=False)
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    batch, logp = lagged_batch(worker, learner)
    assert batch.terminated.any() and not batch.mask.all()
    v = learner.nets.critic(batch.obs.reshape(-1, worker.space.obs_dim)).numpy().reshape(logp.shape)

    def losses_for(correction, reward_scale):
        targets, adv = expected_targets(correction, cfg, batch, logp, reward_scale)
        return pg_step_losses(v, targets, logp, adv, batch.mask)

    metrics = learner.step(batch)
    got = (metrics["critic_loss"], metrics["actor_loss"])
    np.testing.assert_allclose(got, losses_for(applied, cfg.reward_scale), rtol=1e-4, atol=1e-6)
    # The batch tells every other reading apart: another correction, or unscaled rewards.
    for other in [(c, s) for c in ("vtrace", "truncated_is", "none") for s in (0.1, 1.0)]:
        if other != (applied, cfg.reward_scale):
            assert not np.allclose(got, losses_for(*other), rtol=1e-2), other


TINY = Config(envs_per_worker=2, rollout_length=4, total_env_steps=1_000, hidden_sizes=(8,))


# ---- device selection (checked on CPU with a pretend GPU) ---------------------------
def fake_gpus(monkeypatch, n):
    real = tf.config.list_physical_devices
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: [object()] * n if kind == "GPU" else real(kind))


@pytest.mark.parametrize("choice, gpus, expected", [
    ("auto", 1, "/GPU:0"), ("gpu", 1, "/GPU:0"), ("cpu", 1, "/CPU:0"),
    ("auto", 0, "/CPU:0"), ("cpu", 0, "/CPU:0")])
def test_pick_device_uses_a_visible_gpu_unless_told_cpu(monkeypatch, choice, gpus, expected):
    fake_gpus(monkeypatch, gpus)
    assert pick_device(choice) == expected


def test_asking_for_a_gpu_without_one_fails_with_a_clear_message(monkeypatch):
    fake_gpus(monkeypatch, 0)
    with pytest.raises(RuntimeError, match="no GPU"):
        pick_device("gpu")


def test_learner_variables_live_on_the_picked_device():
    learner = Learner(TINY, probe_space("CartPole-v1"))
    assert learner.device == pick_device("auto")
    variables = (learner.nets.actor_variables + learner.nets.critic_variables
                 + list(learner.actor_opt.variables) + list(learner.critic_opt.variables))
    for v in variables:
        assert v.value.device.endswith(learner.device.lstrip("/")), (v.path, v.value.device)


# ---- what the speed work must not change -------------------------------------------
def test_weights_exported_by_the_step_equal_the_variables_after_each_update():
    cfg = Config(envs_per_worker=4, rollout_length=8, total_env_steps=1_000, target_sync_every=2)
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    for update in range(1, 5):
        learner.step(worker.collect(learner.weights()))
        w = learner.weights()
        assert (w.version, w.target_version) == (update, update // 2)
        for network in ("actor", "v_target"):
            got = [a for n, arrays in w.parts.items() if n.startswith(network + ".")
                   for a in arrays]
            assert len(got) == len(learner.nets.path(network))
            for a, var in zip(got, learner.nets.path(network)):
                np.testing.assert_array_equal(a, var.numpy())
    bad = worker.collect(learner.weights())
    bad.rewards[0, 0] = np.nan
    assert "learning_rate_actor" not in learner.step(bad)  # skipped: nothing moves
    w = learner.weights()
    got = [a for n in ("actor.encoder", "actor.head") for a in w.parts[n]]
    for a, var in zip(got, learner.nets.path("actor")):
        np.testing.assert_array_equal(a, var.numpy())


def test_warm_up_runs_the_step_without_changing_any_state():
    cfg = Config(envs_per_worker=4, rollout_length=8, total_env_steps=1_000)
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    state = lambda: [v.numpy().copy() for v in learner.nets.actor.trainable_variables  # noqa: E731
                     + learner.nets.critic.trainable_variables + learner.nets.v_target.weights
                     + learner.actor_opt.variables + learner.critic_opt.variables]
    before = state()
    learner.warm_up()
    assert all(np.array_equal(a, b) for a, b in zip(before, state()))
    assert (learner.updates, learner.policy_version, learner.target_version) == (0, 0, 0)
    assert learner.skipped_updates == 0
    learner.step(worker.collect(learner.weights()))
    assert learner.policy_version == 1


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_one_pass_one_minibatch_of_the_clipped_objective_is_the_policy_gradient_step(env):
    """At the first minibatch the ratio is 1, where the surrogate's gradient is the
    policy gradient: so clip with 1 x 1 must land on the very weights pg does; with
    more passes and minibatches each one is an optimizer step of its own."""
    kw = dict(env=env, mode="sync", entropy_coef=0.01, hidden_sizes=(16,))
    _, worker, pg = setup(**kw)
    _, _, clip = setup(**kw, policy_loss="clip", update_epochs=1, minibatch_size=10**6)
    batch = worker.collect(pg.weights())
    pg.step(batch)
    m = clip.step(batch)
    assert m["clip_fraction"] == 0.0 and m["importance_ratio"] == pytest.approx(1.0)
    assert m["behaviour_kl"] == pytest.approx(0.0, abs=1e-6)  # sync: mu is pi
    for a, b in zip(arrays(pg.nets.actor_variables + pg.nets.critic_variables),
                    arrays(clip.nets.actor_variables + clip.nets.critic_variables)):
        np.testing.assert_allclose(a, b, atol=2e-6)
    n = batch.rewards.size  # 4 minibatches of it
    _, _, many = setup(**kw, policy_loss="clip", update_epochs=3, minibatch_size=n // 4)
    before = arrays(many.nets.actor_variables)
    many.step(batch)
    assert int(many.actor_opt.iterations) == int(many.critic_opt.iterations) == 12
    assert not same(before, arrays(many.nets.actor_variables))


@pytest.mark.e2e
def test_the_clipped_objective_solves_cartpole_where_one_step_per_batch_does_not():
    """Same batches (serial sync, 8 envs x 128 steps), same budget: 4 passes of 16
    minibatches solved seeds 0-2 in 57k-61k steps; one pg step per batch read 73-104
    at 60k-70k."""
    import tempfile

    from helpers import train_quietly

    results = {}
    for loss in ("clip", "pg"):
        cfg = Config(serial=True, num_workers=1, mode="sync", policy_loss=loss, seed=0,
                     total_env_steps=70_000, stop_at_return=475, envs_per_worker=8,
                     rollout_length=128, update_epochs=4, minibatch_size=64)
        with tempfile.TemporaryDirectory() as d:
            results[loss] = train_quietly(cfg, f"{d}/run", every_s=60)
    assert results["clip"]["solved"] and results["clip"]["mean_return_100"] >= 475, results["clip"]
    assert results["pg"]["mean_return_100"] < 300, results["pg"]


def test_behaviour_kl_measures_how_far_the_batch_policy_is_from_the_learner_s():
    """Async mode's diagnostic: ~0 for a batch the learner's own policy collected, and
    positive for the same batch once the learner has moved on."""
    _, worker, learner = setup(mode="async", policy_loss="clip", hidden_sizes=(16,))
    batch = worker.collect(learner.weights())
    fresh = learner.step(batch)
    for _ in range(3):
        stale = learner.step(batch)
    assert fresh["behaviour_kl"] == pytest.approx(0.0, abs=1e-6)
    assert stale["behaviour_kl"] > 1e-5 and stale["approx_kl"] > 0.0

