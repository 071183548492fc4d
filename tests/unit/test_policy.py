"""The worker's NumPy policy equals the learner's Keras networks, and stays light."""

import json

import numpy as np
import pytest
import tensorflow as tf
from helpers import python

from distributed_ac.acting.numpy_policy import VALUE_BLOCK, Policy
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.bench import phases
from distributed_ac.config.schema import Config
from distributed_ac.core.errors import ConfigError
from distributed_ac.envs.vector import probe_space
from distributed_ac.learning import distributions
from distributed_ac.learning.learner import Learner
from distributed_ac.models import spec as names
from distributed_ac.models.mlp import mlp_forward
from distributed_ac.models.spec import ModelSpec


def _actor_out(learner, x):
    out = learner.nets.actor(x)
    return (out[0] if isinstance(out, list) else out).numpy()


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("topology", ["separate", "shared"])
@pytest.mark.parametrize("activation", ["tanh", "relu", "elu", "silu"])
def test_numpy_forward_matches_keras_within_1e5(env, topology, activation):
    cfg = Config(env=env, topology=topology, activation=activation, hidden_sizes=(32, 16))
    space = probe_space(env)
    learner = Learner(cfg, space)
    policy = Policy(space, learner.spec)
    policy.load(learner.weights())
    x = np.random.default_rng(0).normal(size=(64, space.obs_dim)).astype(np.float32) * 3
    np.testing.assert_allclose(policy.forward(x), _actor_out(learner, x), atol=1e-5)
    np.testing.assert_allclose(policy.value(x), learner.nets.v_target(x).numpy()[:, 0], atol=1e-5)


def test_an_activation_without_a_numpy_twin_is_refused_when_the_config_is_built():
    """Workers never import TensorFlow: an activation they could not compute would."""
    with pytest.raises(ConfigError, match="'activation' must be one of"):
        Config(activation="gelu")


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_worker_log_prob_equals_learner_log_prob(env):
    cfg = Config(env=env, log_std_init=-0.3)
    space = probe_space(env)
    learner = Learner(cfg, space)
    policy = Policy(space, learner.spec)
    policy.load(learner.weights())
    x = np.random.default_rng(1).normal(size=(256, space.obs_dim)).astype(np.float32)
    stored, env_action, logp = policy.act(x, np.random.default_rng(2))
    if space.discrete:
        ref = distributions.categorical_log_prob(learner.nets.actor(x), stored)
        assert set(np.unique(env_action)) <= {0, 1}
    else:
        mean, log_std = learner.nets.actor(x)
        ref = distributions.tanh_gaussian_log_prob(stored, mean, log_std, tf.constant(space.half_range))
        assert np.all(np.abs(env_action) <= 2.0)  # rescaled into Pendulum's Box
    np.testing.assert_allclose(logp, ref.numpy(), atol=1e-4)


WORKER_PROBE = """
import json, sys
from distributed_ac.bench.phases import random_weights
from distributed_ac.config.schema import Config
from distributed_ac.acting.worker import RolloutWorker

def rss_mb():  # current resident set (ru_maxrss would inherit the parent's peak across exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

cfg = Config(env="CartPole-v1", envs_per_worker=64, rollout_length=32)
w = RolloutWorker(cfg)
weights = random_weights(cfg, w.space)
for _ in range(20):
    b = w.collect(weights)
print(json.dumps({"tf": "tensorflow" in sys.modules, "keras": "keras" in sys.modules,
                  "ray": "ray" in sys.modules,
                  "rss_mb": rss_mb()}))
"""


def test_rollout_worker_imports_no_tensorflow_and_stays_under_200mb():
    out = python("-c", WORKER_PROBE, check=True)
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert not facts["tf"] and not facts["keras"] and not facts["ray"]
    assert facts["rss_mb"] < 200, facts


@pytest.mark.parametrize("activation", ["tanh", "relu", "sigmoid"])
def test_results_stay_valid_when_later_calls_reuse_the_policys_buffers(activation):
    cfg = Config(activation=activation)
    space = probe_space("CartPole-v1")
    policy = Policy(space, ModelSpec.of(cfg, space))
    w = phases.random_weights(cfg, space)
    policy.load(w)
    rng = np.random.default_rng(0)
    big, small = (rng.normal(size=(n, 4)).astype(np.float32) for n in (1500, 3))
    values, logits = policy.value(big), policy.forward(big)
    kept = values.copy(), logits.copy()
    policy.value(small), policy.forward(small), policy.act(small, rng)  # same buffers, fewer rows
    np.testing.assert_array_equal(values, kept[0])
    np.testing.assert_array_equal(logits, kept[1])
    p = w.parts

    def reference(encoder, head, x):
        return mlp_forward(p[head], mlp_forward(p[encoder], x, activation, last_linear=False),
                           activation, last_linear=True)

    np.testing.assert_allclose(values, reference(names.TARGET_ENCODER, names.TARGET_HEAD, big)[:, 0],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(policy.forward(small),
                               reference(names.ACTOR_ENCODER, names.ACTOR_HEAD, small),
                               rtol=1e-5, atol=1e-6)


TINY = Config(envs_per_worker=2, rollout_length=4, total_env_steps=1_000, hidden_sizes=(8,))


def test_policy_values_in_blocks_equal_one_pass_over_all_rows():
    worker = RolloutWorker(TINY, limit_cpus=False)
    pol = Policy(worker.space, ModelSpec.of(TINY, worker.space))
    w = phases.random_weights(TINY, worker.space)
    pol.load(w)
    obs = np.random.default_rng(0).standard_normal((3 * VALUE_BLOCK + 7, 4)).astype(np.float32)
    features = mlp_forward(w.parts[names.TARGET_ENCODER], obs, "tanh", last_linear=False)
    whole = mlp_forward(w.parts[names.TARGET_HEAD], features, "tanh", last_linear=True)[:, 0]
    np.testing.assert_allclose(pol.value(obs), whole, rtol=1e-6, atol=1e-6)
    assert pol.value(obs).shape == (len(obs),)
