"""The mlp_ln encoder (each hidden layer Dense, then LayerNorm, then the activation): its
NumPy twin against its Keras layer and a reference written like the formula, and the
part in a run's model: chosen by `torso: mlp_ln` for the learner, the workers' policy and
the export, which all compute the same function of the same arrays."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.trained.savedmodel import PolicyModule
from distributed_ac.config.schema import Config
from distributed_ac.core.activations import ACTIVATIONS
from distributed_ac.core.errors import ConfigError
from distributed_ac.envs.space import EnvSpace
from distributed_ac.learning.learner import Learner
from distributed_ac.learning.networks import checkpoint_objects
from distributed_ac.models import keras_mlp_ln
from distributed_ac.models.mlp_ln import EPS, LayerNormMLPEncoder
from distributed_ac.models.spec import encoder_for

RNG = np.random.default_rng(0)


def reference(arrays, x, activation):
    """Dense -> LayerNorm -> activation per layer, as the formula reads, in float64."""
    x = x.astype(np.float64)
    for i in range(0, len(arrays), 4):
        w, b, gamma, beta = (a.astype(np.float64) for a in arrays[i:i + 4])
        y = x @ w + b
        y = (y - y.mean(-1, keepdims=True)) / np.sqrt(y.var(-1, keepdims=True) + EPS)
        x = ACTIVATIONS[activation](y * gamma + beta)
    return x


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu", "silu", "linear"])
def test_the_numpy_twin_matches_the_keras_layer_within_1e5(activation):
    layer = keras_mlp_ln.LayerNormMLPEncoder((32, 16), activation, seed=3, name="ln")
    x = RNG.normal(size=(70, 5)).astype(np.float32) * 3 + 1
    layer(x)  # builds it
    for v in layer.bundle_variables[2::4] + layer.bundle_variables[3::4]:  # gamma, beta
        v.assign(RNG.normal(size=v.shape).astype(np.float32))  # away from 1 and 0
    want = layer(x).numpy()
    arrays = [v.numpy() for v in layer.bundle_variables]
    # the bundle order: each layer's kernel, bias, gamma and beta, input to output
    assert [a.shape for a in arrays] == [(5, 32), (32,), (32,), (32,),
                                         (32, 16), (16,), (16,), (16,)]
    twin = LayerNormMLPEncoder(activation)
    twin.load(arrays)
    np.testing.assert_allclose(twin(x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reference(arrays, x, activation), want, rtol=1e-5, atol=1e-5)


def test_each_layer_is_normalised_before_its_activation():
    """At initialisation (gamma 1, beta 0) a linear mlp_ln's rows have mean 0 and
    variance 1, whatever the input's scale; with tanh none leaves (-1, 1)."""
    x = RNG.normal(size=(64, 4)).astype(np.float32) * 1000 + 50
    linear = keras_mlp_ln.LayerNormMLPEncoder((64, 8), "linear", seed=1)(x).numpy()
    np.testing.assert_allclose(linear.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(linear.var(-1), 1, atol=1e-3)
    assert np.abs(keras_mlp_ln.LayerNormMLPEncoder((64,), "tanh", seed=1)(x).numpy()).max() < 1


def test_a_twin_reused_on_fewer_rows_returns_those_rows_only():
    layer = keras_mlp_ln.LayerNormMLPEncoder((16,), "tanh", seed=2)
    x = RNG.normal(size=(50, 3)).astype(np.float32)
    layer(x)
    twin = LayerNormMLPEncoder("tanh")
    twin.load([v.numpy() for v in layer.bundle_variables])
    twin(x)
    np.testing.assert_allclose(twin(x[:7]), layer(x[:7]).numpy(), atol=1e-5)


def _trained_learner(cfg: Config):
    """A Learner and its worker's policy after one update on a real CartPole batch."""
    worker = RolloutWorker(cfg, limit_cpus=False)
    learner = Learner(cfg, worker.space)
    assert learner.step(worker.collect(learner.weights()))["applied"]
    policy = Policy(worker.space, learner.spec)
    policy.load(learner.weights())
    return learner, policy, worker.space


@pytest.mark.parametrize("core", ["none", "gru"])
def test_torso_mlp_ln_builds_the_learner_the_workers_and_the_export_from_one_part(core):
    cfg = Config(env="CartPole-v1", torso="mlp_ln", core=core, hidden_sizes=(32, 16),
                 envs_per_worker=4, rollout_length=8, total_env_steps=10**6)
    learner, policy, space = _trained_learner(cfg)
    spec = learner.spec
    assert spec.encoder == "mlp_ln" and not spec.shared  # topology auto: separate, as an MLP
    assert not spec.image_encoder  # a vector encoder, as mlp is
    if core != "none":
        assert spec.core_size == 16  # core_size auto behind an MLP: its last width
    encoder = learner.nets.parts["actor.encoder"]
    assert isinstance(encoder, keras_mlp_ln.LayerNormMLPEncoder)
    assert isinstance(policy.encoder, LayerNormMLPEncoder)
    obs = RNG.normal(size=(32, space.obs_dim)).astype(np.float32) * 2
    if core == "none":
        np.testing.assert_allclose(policy.forward(obs), learner.nets.actor(obs).numpy(), atol=1e-5)
        np.testing.assert_allclose(policy.value(obs), learner.nets.v_target(obs).numpy()[:, 0],
                                   atol=1e-5)
    module = PolicyModule(learner.nets, space)
    policy.reset_state(32)
    _, expected, _ = policy.act(obs, None, deterministic=True)
    args = [tf.constant(obs)] + ([module.initial_state(tf.constant(32))] if core != "none" else [])
    served = module.action(*args)
    served = served[0] if core != "none" else served
    np.testing.assert_array_equal(served.numpy(), expected)


def test_a_checkpoint_of_an_mlp_ln_learner_restores_every_encoder_array(tmp_path):
    cfg = Config(env="CartPole-v1", torso="mlp_ln", envs_per_worker=4, rollout_length=8,
                 total_env_steps=10**6)
    learner, _, space = _trained_learner(cfg)
    path = tf.train.Checkpoint(**checkpoint_objects(learner.nets)).write(str(tmp_path / "ck"))
    other = Learner(dataclasses.replace(cfg, seed=cfg.seed + 1), space)
    tf.train.Checkpoint(**checkpoint_objects(other.nets)).read(path) \
        .assert_existing_objects_matched()
    for name in ("actor.encoder", "critic.encoder", "v_target.encoder"):
        mine, theirs = learner.nets.parts[name], other.nets.parts[name]
        assert len(mine.bundle_variables) == 4 * len(cfg.hidden_sizes)
        for a, b in zip(mine.bundle_variables, theirs.bundle_variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_torso_mlp_ln_on_images_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^torso mlp_ln takes vector observations; .* "
                                          r"\(use --torso nature or impala\)$"):
        encoder_for(Config(torso="mlp_ln"), (36, 36, 1))
    image = EnvSpace("images", 36 * 36, True, 3, obs_shape=(36, 36, 1), obs_dtype="uint8")
    with pytest.raises(ConfigError, match="takes vector observations"):
        Learner(Config(torso="mlp_ln"), image)
