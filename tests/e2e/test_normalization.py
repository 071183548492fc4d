"""Observation and return normalisation: the merge is exact, and the statistics are
applied the same way by the learner, the workers' NumPy policy, evaluate and export."""

import tempfile

import numpy as np
import pytest
import tensorflow as tf
from paths import FAST_CONFIG

from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch
from distributed_ac.core.normalization import (
    chan_merge,
    merge_all,
    moments,
    normalize_np,
)
from distributed_ac.envs.vector import probe_space
from distributed_ac.learning.learner import Learner
from distributed_ac.learning.normalizers import RunningMoments
from distributed_ac.models.spec import ModelSpec

SCALE = np.array([1000.0, 1.0, 0.001, 50.0], np.float32)  # CartPole's 4 obs, badly scaled


def test_chan_merge_of_any_split_equals_the_moments_of_the_whole():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 7.0, size=(1000, 3))
    parts = np.split(x, [1, 2, 50, 400, 999])  # sizes 1, 1, 48, 350, 599, 1
    n, mean, var = 0.0, np.zeros(3), np.ones(3)
    for p in parts:
        if n == 0:
            n, mean, var = len(p), p.mean(0), p.var(0)
        else:
            n, mean, var = chan_merge(n, mean, var, len(p), p.mean(0), p.var(0))
    assert n == 1000
    np.testing.assert_allclose(mean, x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(var, x.var(0), rtol=1e-10)
    # the 1-D form the returns use, with empty batches in between
    r = rng.normal(size=300)
    merged = merge_all([moments(r[:10]), moments(r[:0]), moments(r[10:])])
    np.testing.assert_allclose(merged, [300, r.mean(), r.var()], rtol=1e-12)


def test_running_moments_in_the_graph_merge_exactly_and_ignore_empty_batches():
    rm = RunningMoments(2, "t")
    x = np.random.default_rng(1).normal(5.0, 2.0, size=(64, 2))
    rm.merge_samples(tf.constant(x[:40]))
    rm.merge(tf.constant(0.0, tf.float64), tf.zeros(2, tf.float64), tf.zeros(2, tf.float64))
    rm.merge_samples(tf.constant(x[40:]))
    assert rm.count.numpy() == 64
    np.testing.assert_allclose(rm.mean.numpy(), x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(rm.var.numpy(), x.var(0), rtol=1e-10)


def test_the_learner_normalises_with_the_statistics_the_workers_acted_with():
    """Sync mode stays exactly on-policy: the step normalises with the statistics in
    the bundle the batch was made with, and merges the batch in only afterwards."""
    cfg = Config(normalize_obs=True, mode="sync", envs_per_worker=8, rollout_length=16,
                 hidden_sizes=(16,))
    learner = Learner(cfg, probe_space(cfg.env))
    space = probe_space(cfg.env)
    policy = Policy(space, ModelSpec.of(cfg, space))
    rng = np.random.default_rng(0)
    obs = (rng.normal(size=(16, 8, 4)) * SCALE).astype(np.float32)
    seen = []
    for i in range(3):
        w = learner.weights()
        policy.load(w)
        stored, _, logp = policy.act(obs.reshape(-1, 4), rng)
        zeros = np.zeros((16, 8), np.float32)
        batch = Batch(obs=obs, actions=stored.reshape(16, 8), rewards=zeros + 1,
                      terminated=zeros, truncated=zeros, mask=zeros + 1,
                      behaviour_logp=logp.reshape(16, 8),
                      values=policy.value(np.concatenate([obs.reshape(-1, 4), obs[-1]])
                                          ).reshape(17, 8),
                      policy_version=w.version, target_version=w.target_version)
        m = learner.step(batch)
        assert m["importance_ratio"] == pytest.approx(1.0, abs=1e-5)  # same numbers both sides
        seen.append(obs.reshape(-1, 4))
        all_obs = np.concatenate(seen).astype(np.float64)
        norm = learner.nets.obs_norm
        assert norm.count.numpy() == len(all_obs)
        np.testing.assert_allclose(norm.mean.numpy(), all_obs.mean(0), rtol=1e-6)
        np.testing.assert_allclose(norm.var.numpy(), all_obs.var(0), rtol=1e-5)
        obs = (rng.normal(size=(16, 8, 4)) * SCALE + 3.0 * SCALE).astype(np.float32)
    # the bundle carries the statistics the policy applies, and they normalise as promised
    w = learner.weights()
    x = (rng.normal(size=(32, 4)) * SCALE).astype(np.float32)
    want = np.clip((x - norm.mean.numpy()) / np.sqrt(norm.var.numpy() + 1e-8), -10, 10)
    mean, inv_std = w.parts["obs_norm"]
    np.testing.assert_allclose(normalize_np(x, mean, inv_std, 10.0), want, rtol=1e-4, atol=1e-5)
    policy.load(w)
    np.testing.assert_allclose(policy.forward(x), learner.nets.actor(norm(x)).numpy(), atol=1e-5)
    np.testing.assert_allclose(policy.value(x), learner.nets.v_target(norm(x)).numpy()[:, 0],
                               atol=1e-5)


def _batch_for(learner, policy, obs, rng, mask=None):
    """A batch of `obs` [T, N, 4] acted on by the learner's current weights."""
    T, N = obs.shape[:2]
    w = learner.weights()
    policy.load(w)
    stored, _, logp = policy.act(obs.reshape(-1, 4), rng)
    zeros = np.zeros((T, N), np.float32)
    return Batch(obs=obs, actions=stored.reshape(T, N), rewards=zeros + 1, terminated=zeros,
                 truncated=zeros, mask=zeros + 1 if mask is None else mask,
                 behaviour_logp=logp.reshape(T, N), values=np.zeros((T + 1, N), np.float32),
                 policy_version=w.version, target_version=w.target_version)


def test_reset_step_observations_are_left_out_of_the_statistics():
    """A reset step's input is a copy of the episode's final observation (NEXT_STEP
    autoreset): counting it would weigh final states twice."""
    cfg = Config(normalize_obs=True, mode="sync", num_envs=4, rollout_length=8,
                 hidden_sizes=(8,))
    learner = Learner(cfg, probe_space(cfg.env))
    policy, rng = Policy(learner.space, learner.spec), np.random.default_rng(1)
    obs = rng.normal(size=(8, 4, 4)).astype(np.float32)
    mask = np.ones((8, 4), np.float32)
    mask[3, 1] = mask[6, 2] = 0.0
    obs[3, 1] = obs[6, 2] = 1000.0  # what a duplicated final state would drag the mean to
    learner.step(_batch_for(learner, policy, obs, rng, mask))
    real = obs[mask > 0].astype(np.float64)
    norm = learner.nets.obs_norm
    assert norm.count.numpy() == len(real) == 30
    np.testing.assert_allclose(norm.mean.numpy(), real.mean(0), rtol=1e-6)
    np.testing.assert_allclose(norm.var.numpy(), real.var(0), rtol=1e-5)


def test_async_updates_normalise_a_stale_batch_with_the_learners_newest_statistics():
    """In async mode the learner has merged other batches since a batch's version: it
    normalises with its newest statistics (the importance ratios take the difference as
    policy lag). The ratio is 1 exactly when the behaviour log-probs are computed under
    those statistics, and not under the ones the batch's version had."""
    cfg = Config(normalize_obs=True, mode="async", num_envs=8, rollout_length=16,
                 hidden_sizes=(16,), actor_lr=1e-12, critic_lr=1e-12)  # weights ~ still
    learner = Learner(cfg, probe_space(cfg.env))
    policy, rng = Policy(learner.space, learner.spec), np.random.default_rng(2)
    obs = (rng.normal(size=(16, 8, 4)) * SCALE).astype(np.float32)
    stale = _batch_for(learner, policy, obs, rng)  # acted on with count-0 statistics
    learner.step(_batch_for(learner, policy, obs + SCALE, rng))  # the statistics move
    fresh = _batch_for(learner, policy, obs, rng)
    # (a near-uniform fresh policy: log-probs move little, but far beyond float error)
    assert abs(learner.step(stale)["importance_ratio"] - 1.0) > 1e-4
    # the same actions, scored under the statistics the learner holds now
    fresh.actions = stale.actions
    fresh.behaviour_logp = np.asarray(learner.objective.policy_terms(
        learner.nets.actor(learner.nets.obs_norm(obs.reshape(-1, 4))),
        stale.actions, (16, 8))[0])
    assert learner.step(fresh)["importance_ratio"] == pytest.approx(1.0, abs=1e-6)


def test_without_normalize_obs_the_bundle_has_no_statistics_and_nothing_changes():
    cfg = Config(hidden_sizes=(8,))
    learner = Learner(cfg, probe_space(cfg.env))
    assert learner.nets.obs_norm is None and "obs_norm" not in learner.weights().parts


def test_worker_return_moments_are_those_of_the_discounted_returns():
    cfg = Config(normalize_reward=True, envs_per_worker=4, rollout_length=50, gamma=0.9,
                 hidden_sizes=(8,))
    learner = Learner(cfg, probe_space(cfg.env))
    worker = RolloutWorker(cfg, 0, limit_cpus=False)
    batch = worker.collect(learner.weights())
    # recompute: per sub-env, G <- gamma G + r on real steps, reset after an episode ends
    g, samples = np.zeros(4), []
    for t in range(50):
        real = batch.mask[t] > 0
        g = g * 0.9 + np.where(real, batch.rewards[t], 0.0)
        samples.append(g[real])
        g[(batch.terminated[t] + batch.truncated[t] > 0) & real] = 0.0
    np.testing.assert_allclose(batch.return_moments, moments(np.concatenate(samples)), rtol=1e-9)
    assert batch.return_moments[0] == batch.mask.sum()
    # the learner merges them, and divides rewards by their std from the next update on
    learner.step(batch)
    np.testing.assert_allclose(learner.return_stats.var.numpy()[0], batch.return_moments[2],
                               rtol=1e-9)


def test_checkpoint_evaluate_and_export_apply_the_same_statistics(tmp_path):
    from distributed_ac.trained.load import load_trained
    from distributed_ac.trained.savedmodel import export
    from distributed_ac.training.trainer import train

    cfg = Config(serial=True, num_workers=1, normalize_obs=True, envs_per_worker=4,
                 rollout_length=8, hidden_sizes=(8,), total_env_steps=32 * 5, seed=3)
    train(cfg, run_dir=tmp_path / "run")
    _, space, learner, _ = load_trained(tmp_path / "run")
    norm = learner.nets.obs_norm
    # restored: every trained observation merged (the reset steps' copies left out)
    assert 32 * 5 - 20 < norm.count.numpy() < 32 * 5
    policy = Policy(space, ModelSpec.of(cfg, space))
    policy.load(learner.weights())
    x = np.random.default_rng(2).normal(size=(16, 4)).astype(np.float32) * 2
    _, greedy, _ = policy.act(x, np.random.default_rng(0), deterministic=True)
    export(tmp_path / "run", tmp_path / "model")
    model = tf.saved_model.load(str(tmp_path / "model"))
    np.testing.assert_array_equal(model.action(tf.constant(x)).numpy(), greedy)
    np.testing.assert_allclose(model.value(tf.constant(x)).numpy(),
                               learner.nets.critic(norm(x)).numpy()[:, 0], atol=1e-5)


@pytest.mark.e2e
def test_observation_normalisation_learns_cartpole_whose_observations_are_offset_by_1000():
    """fakes:ScaledCartPole (x -> 1000 x + 1000) with the fast config, serial async: seeds
    0-5 solved in 63k-215k steps with normalize_obs (seed 0 the slowest), and seeds 0-1
    read 66 and 112 at 250k without."""
    from helpers import train_quietly

    from distributed_ac.config.schema import load_yaml

    base = load_yaml(FAST_CONFIG)
    results = {}
    for norm in (True, False):
        cfg = Config(**{**vars(base), "env": "fakes:ScaledCartPole", "serial": True,
                        "num_workers": 1, "normalize_obs": norm, "seed": 0,
                        "total_env_steps": 250_000, "stop_at_return": 475})
        with tempfile.TemporaryDirectory() as d:
            results[norm] = train_quietly(cfg, f"{d}/run", every_s=60)
    assert results[True]["solved"] and results[True]["mean_return_100"] >= 475, results[True]
    assert results[False]["mean_return_100"] < 300, results[False]  # the mechanism is the cause
