"""The recurrent cores: the workers' NumPy step equals the learner's Keras unroll to 1e-5
over a sequence with episode starts in the middle, for both cells."""

import numpy as np
import pytest
import tensorflow as tf

from distributed_ac.models import keras_cores
from distributed_ac.models.cores import RecurrentCore


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_numpy_steps_equal_the_keras_unroll_across_episode_starts(kind):
    T, N, F, H = 12, 5, 7, 16
    rng = np.random.default_rng(0)
    x = rng.normal(size=(T, N, F)).astype(np.float32)
    starts = np.zeros((T, N), bool)
    starts[0, 1] = starts[4, 0] = starts[4, 3] = starts[9, 2] = True  # resets mid-sequence
    layer = keras_cores.RecurrentCore(kind, H, seed=3)
    layer.build((None, F))
    state0 = tuple(rng.normal(size=(N, H)).astype(np.float32) for _ in range(2 if kind == "lstm" else 1))
    outs, final = layer(tf.constant(x), tuple(tf.constant(s) for s in state0), tf.constant(starts))
    twin = RecurrentCore(kind, H)
    twin.load([v.numpy() for v in layer.bundle_variables])
    state, steps = state0, []
    for t in range(T):
        out, state = twin.step(x[t], state, starts[t])
        steps.append(out)
    np.testing.assert_allclose(np.stack(steps), outs.numpy(), rtol=1e-5, atol=1e-5)
    for a, b in zip(state, final):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-5)
    # a start really forgets: the same inputs from another state give the same output
    other, _ = twin.step(x[4], tuple(s + 1.0 for s in state0), starts[4])
    again, _ = twin.step(x[4], state0, starts[4])
    np.testing.assert_allclose(other[0], again[0], atol=1e-6)  # row 0 started at t = 4
    assert not np.allclose(other[1], again[1])  # row 1 did not


@pytest.mark.parametrize("env,hidden,expected", [
    ("CartPole-v1", (64, 64), 64), ("CartPole-v1", (256, 32), 32),
    ("distributed_ac.envs.choices:ImageChoice84", (64, 64), 256)])
def test_core_size_auto_is_the_encoders_width_behind_an_mlp_and_256_behind_a_large_cnn(
        env, hidden, expected):
    from distributed_ac.config.schema import Config
    from distributed_ac.envs.vector import probe_space
    from distributed_ac.models.spec import ModelSpec

    cfg = Config(env=env, core="lstm", hidden_sizes=hidden)
    assert ModelSpec.of(cfg, probe_space(env)).core_size == expected
    explicit = Config(env=env, core="lstm", hidden_sizes=hidden, core_size=40)
    assert ModelSpec.of(explicit, probe_space(env)).core_size == 40
