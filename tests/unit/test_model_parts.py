"""Each part of the model, one at a time: its NumPy twin (workers), its Keras layer
(learner) and its plain-TF forward (export) compute the same function of the same
arrays, and the Keras layer hands its arrays over in the order the twin reads them."""

import typing

import numpy as np
import pytest
import tensorflow as tf

from distributed_ac.config.schema import Config
from distributed_ac.core.activations import ACTIVATIONS
from distributed_ac.models import keras_cnn, keras_heads, keras_mlp
from distributed_ac.models.cnn import CNNEncoder
from distributed_ac.models.heads import CategoricalHead, TanhGaussianHead, ValueHead
from distributed_ac.models.mlp import MLPEncoder, mlp_forward

RNG = np.random.default_rng(0)


def numpy_of(layer) -> list[np.ndarray]:
    return [v.numpy() for v in layer.bundle_variables]


def test_the_configs_activations_are_the_numpy_tables():
    """One list: Config.activation's choices are read from the workers' table."""
    choices = typing.get_args(typing.get_type_hints(Config)["activation"])
    assert choices == tuple(ACTIVATIONS)


@pytest.mark.parametrize("activation", ACTIVATIONS)  # every choice, Keras' function of its name
def test_mlp_encoder_numpy_keras_and_export_agree(activation):
    keras_part = keras_mlp.MLPEncoder((32, 16), activation, seed=3, prefix="x")
    x = RNG.normal(size=(70, 5)).astype(np.float32) * 2
    want = keras_part(x).numpy()
    # the bundle order: each layer's kernel, then its bias, input to output
    assert [a.shape for a in numpy_of(keras_part)] == [(5, 32), (32,), (32, 16), (16,)]
    twin = MLPEncoder(activation)
    twin.load(numpy_of(keras_part))
    np.testing.assert_allclose(twin(x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mlp_forward(numpy_of(keras_part), x, activation, False), want,
                               rtol=1e-5, atol=1e-5)
    exported = keras_mlp.tf_forward(keras_part.bundle_variables, tf.constant(x), activation)
    np.testing.assert_allclose(exported.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind, shape", [("nature", (36, 36, 2)), ("impala", (21, 21, 3)),
                                         ("small", (10, 10, 4)), ("small", (7, 7, 3))])
def test_cnn_encoders_numpy_keras_and_export_agree_on_uint8_frames(kind, shape):
    keras_part = keras_cnn.make_torso(kind, f"t_{kind}", seed=5)
    x = RNG.integers(0, 256, (40, *shape), dtype=np.uint8)  # more than one NumPy block
    want = keras_part(x).numpy()
    assert np.abs(want).max() > 1e-3  # not a vacuous match
    arrays = numpy_of(keras_part)
    # the bundle order: each conv's [kh, kw, C_in, C_out] kernel and bias as the image
    # meets them, the dense layer last
    assert arrays[0].shape[2] == shape[2] and arrays[-2].shape[1] == keras_part.dense.units
    kernels = [a for a in arrays[:-2] if a.ndim == 4]
    first_filters = {"nature": [32, 64], "impala": [16, 16], "small": [16]}[kind]
    assert [k.shape[3] for k in kernels][:2] == first_filters
    twin = CNNEncoder(kind)
    twin.load(arrays)
    scale = np.abs(want).max()  # float32 sums over 15 convolutions: error relative to it
    np.testing.assert_allclose(twin(x), want, rtol=1e-5, atol=1e-5 * scale)
    exported = keras_cnn.tf_forward(kind, keras_part.bundle_variables, tf.constant(x))
    np.testing.assert_allclose(exported.numpy(), want, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.bool_])
@pytest.mark.parametrize("shape", [(10, 10, 4), (7, 7, 3)])
def test_small_cnn_numpy_keras_and_export_agree_on_0_1_frames(shape, dtype):
    # MinAtar's frames are 0/1 channels: taken as they are (no 1/255), unlike uint8 pixels
    keras_part = keras_cnn.make_torso("small", "t_small01", seed=7)
    x = (RNG.random((40, *shape)) < 0.3).astype(dtype)
    want = keras_part(x).numpy()
    assert want.shape == (40, 128) and np.abs(want).max() > 0.1  # unscaled, not vacuous
    arrays = numpy_of(keras_part)
    assert [a.shape for a in arrays] == [(3, 3, shape[2], 16), (16,),
                                         ((shape[0] - 2) * (shape[1] - 2) * 16, 128), (128,)]
    twin = CNNEncoder("small")
    twin.load(arrays)
    np.testing.assert_allclose(twin(x), want, rtol=1e-5, atol=1e-5)
    exported = keras_cnn.tf_forward("small", keras_part.bundle_variables, tf.constant(x))
    np.testing.assert_allclose(exported.numpy(), want, rtol=1e-5, atol=1e-5)


def _head_parts(prefix, head, extra=()):
    return {f"{prefix}.head": numpy_of(head), **dict(extra)}


def test_categorical_head_logits_and_log_probs_agree_with_keras():
    head = keras_heads.DenseHead(4, "pi", 1.0, seed=1)
    features = RNG.normal(size=(300, 8)).astype(np.float32)
    logits = head(features).numpy()
    twin = CategoricalHead(action_start=2)
    twin.load(_head_parts("actor", head), "actor")
    np.testing.assert_allclose(twin(features), logits, rtol=1e-5, atol=1e-6)
    stored, logp = twin.sample(twin(features), np.random.default_rng(1), deterministic=False)
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(logp, log_softmax[np.arange(300), stored], atol=1e-5)
    assert set(np.unique(twin.env_action(stored))) <= {2, 3, 4, 5}  # Discrete(4, start=2)
    greedy, _ = twin.sample(twin(features), None, deterministic=True)
    np.testing.assert_array_equal(greedy, logits.argmax(-1))


def test_tanh_gaussian_head_mean_log_std_and_squash_agree_with_keras():
    head = keras_heads.DenseHead(2, "pi", 1.0, seed=2)
    log_std = keras_heads.LogStd(2, -0.5)
    features = RNG.normal(size=(200, 8)).astype(np.float32)
    mean = head(features).numpy()
    np.testing.assert_allclose(log_std(mean).numpy(), np.full((200, 2), -0.5), atol=1e-7)
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 1.0])
    twin = TanhGaussianHead(low, high)
    twin.load(_head_parts("actor", head, {"actor.log_std": numpy_of(log_std)}), "actor")
    np.testing.assert_allclose(twin(features), mean, rtol=1e-5, atol=1e-6)
    u, logp = twin.sample(twin(features), np.random.default_rng(3), deterministic=False)
    # the density of u, then the change of variables a = low + (tanh(u) + 1) * half_range
    std = np.exp(-0.5)
    gauss = (-0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
    jacobian = np.log((1 - np.tanh(u) ** 2) * (high - low) / 2).sum(-1)
    np.testing.assert_allclose(logp, gauss - jacobian, rtol=1e-4, atol=1e-4)
    a = twin.env_action(u)
    assert np.all(a >= low) and np.all(a <= high)


def test_value_head_agrees_with_keras():
    head = keras_heads.DenseHead(1, "v", 1.0, seed=4)
    features = RNG.normal(size=(50, 8)).astype(np.float32)
    head(features)  # builds it
    twin = ValueHead()
    twin.load(_head_parts("v_target", head), "v_target")
    np.testing.assert_allclose(twin(features), head(features).numpy()[:, 0], rtol=1e-5, atol=1e-6)
    exported = keras_heads.tf_linear(head.bundle_variables, tf.constant(features))
    np.testing.assert_allclose(exported.numpy(), head(features).numpy(), rtol=1e-6, atol=1e-6)
