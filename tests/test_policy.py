"""The worker's NumPy policy equals the learner's Keras networks, and stays light."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from distributed_ac.acting.policy import Policy
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.bench import phases
from distributed_ac.config.schema import Config
from distributed_ac.envs.vector import probe_space
from distributed_ac.learning import distributions
from distributed_ac.learning.learner import Learner


def _actor_out(learner, x):
    out = learner.nets.actor(x)
    return (out[0] if isinstance(out, list) else out).numpy()


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("topology", ["separate", "shared"])
@pytest.mark.parametrize("activation", ["tanh", "relu", "selu"])
def test_numpy_forward_matches_keras_within_1e5(env, topology, activation):
    cfg = Config(env=env, topology=topology, activation=activation, hidden_sizes=(32, 16))
    space = probe_space(env)
    learner = Learner(cfg, space)
    policy = Policy(space, activation)
    policy.load(learner.weights())
    x = np.random.default_rng(0).normal(size=(64, space.obs_dim)).astype(np.float32) * 3
    np.testing.assert_allclose(policy.forward(x), _actor_out(learner, x), atol=1e-5)
    np.testing.assert_allclose(policy.value(x), learner.nets.v_target(x).numpy()[:, 0], atol=1e-5)
    assert policy.uses_tensorflow == (activation == "selu")


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_worker_log_prob_equals_learner_log_prob(env):
    cfg = Config(env=env, log_std_init=-0.3)
    space = probe_space(env)
    learner = Learner(cfg, space)
    policy = Policy(space, cfg.activation)
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
from distributed_ac.config.schema import Config
from distributed_ac.envs.vector import probe_space
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.core.batch import Weights
import numpy as np

def rss_mb():  # current resident set (ru_maxrss would inherit the parent's peak across exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

cfg = Config(env="CartPole-v1", envs_per_worker=64, rollout_length=32)
w = RolloutWorker(cfg)
rng = np.random.default_rng(0)
shapes = [(4, 64), (64,), (64, 64), (64,), (64, 2), (2,)]
vshapes = [(4, 64), (64,), (64, 64), (64,), (64, 1), (1,)]
mk = lambda s: [rng.normal(size=x).astype(np.float32) * 0.1 for x in s]
for _ in range(20):
    b = w.collect(Weights(0, 0, mk(shapes), mk(vshapes)))
print(json.dumps({"tf": "tensorflow" in sys.modules, "keras": "keras" in sys.modules,
                  "ray": "ray" in sys.modules,
                  "rss_mb": rss_mb()}))
"""


def test_rollout_worker_imports_no_tensorflow_and_stays_under_200mb():
    out = subprocess.run([sys.executable, "-c", WORKER_PROBE], capture_output=True, text=True,
                         check=True)
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert not facts["tf"] and not facts["keras"] and not facts["ray"]
    assert facts["rss_mb"] < 200, facts


@pytest.mark.parametrize("activation", ["tanh", "relu", "selu"])
def test_results_stay_valid_when_later_calls_reuse_the_policys_buffers(activation):
    from distributed_ac.acting.policy import (
        NUMPY_ACTIVATIONS,
        activation_fn,
        mlp_forward,
    )
    from distributed_ac.bench.phases import random_weights

    cfg = Config(activation=activation)
    space = probe_space("CartPole-v1")
    policy = Policy(space, activation)
    w = random_weights(cfg, space)
    policy.load(w)
    act = NUMPY_ACTIVATIONS.get(activation) or activation_fn(activation)[0]
    rng = np.random.default_rng(0)
    big, small = (rng.normal(size=(n, 4)).astype(np.float32) for n in (1500, 3))
    values, logits = policy.value(big), policy.forward(big)
    kept = values.copy(), logits.copy()
    policy.value(small), policy.forward(small), policy.act(small, rng)  # same buffers, fewer rows
    np.testing.assert_array_equal(values, kept[0])
    np.testing.assert_array_equal(logits, kept[1])
    np.testing.assert_allclose(values, mlp_forward(w.v_target, big, act)[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(policy.forward(small), mlp_forward(w.actor, small, act), rtol=1e-5, atol=1e-6)


TINY = Config(envs_per_worker=2, rollout_length=4, total_env_steps=1_000, hidden_sizes=(8,))


def test_policy_values_in_blocks_equal_one_pass_over_all_rows():
    from distributed_ac.acting import policy as policy_mod

    worker = RolloutWorker(TINY, limit_cpus=False)
    pol = policy_mod.Policy(worker.space, "tanh")
    pol.load(phases.random_weights(TINY, worker.space))
    obs = np.random.default_rng(0).standard_normal((3 * policy_mod.VALUE_BLOCK + 7, 4)).astype(np.float32)
    whole = policy_mod.mlp_forward(pol._target_layers, obs, np.tanh)[:, 0]
    np.testing.assert_allclose(pol.value(obs), whole, rtol=1e-6, atol=1e-6)
    assert pol.value(obs).shape == (len(obs),)
