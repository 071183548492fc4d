"""What a CNN run gets without being asked: one trunk shared by actor and critic
(topology auto, as Stable-Baselines3's CnnPolicy and cleanRL's ppo_atari), and, on a
CPU, TensorFlow imported with oneDNN's kernels on; an MLP run keeps separate networks
and TensorFlow's own default."""

import textwrap

import numpy as np
import pytest
from helpers import environ_without, python

from distributed_ac.config.schema import Config
from distributed_ac.envs.choices import ImageVectorMultiChoice
from distributed_ac.envs.space import EnvSpace
from distributed_ac.envs.vector import probe_space
from distributed_ac.learning.tf_runtime import has_nvidia_device
from distributed_ac.models.spec import ModelSpec

IMAGE = EnvSpace("images", 36 * 36, True, 4, obs_shape=(36, 36, 1), obs_dtype="uint8")
VECTOR = EnvSpace("vectors", 4, True, 2, obs_shape=(4,))


@pytest.mark.parametrize("topology,space,shared", [
    ("auto", IMAGE, True), ("auto", VECTOR, False),
    ("separate", IMAGE, False), ("shared", VECTOR, True)])
def test_topology_auto_shares_the_trunk_behind_a_cnn_only(topology, space, shared):
    assert ModelSpec.of(Config(topology=topology), space).shared is shared


@pytest.mark.parametrize("core,loss,topology,shared", [
    ("lstm", "clip", "auto", True), ("gru", "clip", "auto", True),
    ("lstm", "pg", "auto", False), ("none", "clip", "auto", False),
    ("lstm", "clip", "separate", False)])
def test_topology_auto_shares_a_recurrent_core_under_the_clipped_loss(core, loss, topology,
                                                                     shared):
    cfg = Config(core=core, policy_loss=loss, topology=topology)
    assert ModelSpec.of(cfg, VECTOR).shared is shared


def test_an_image_beside_vectors_is_a_cnn_run_too():
    space = probe_space("distributed_ac.envs.choices:ImageVectorMultiChoice")
    spec = ModelSpec.of(Config(), space)
    assert spec.mixed and spec.encoder == "nature" and spec.shared


def test_image_vector_multi_choice_pays_16_to_the_policy_that_reads_both():
    env = ImageVectorMultiChoice()
    obs, _ = env.reset(seed=3)
    total, rows, cols = 0.0, 48 // 3, 48 // 4
    for _ in range(16):
        image = obs["image"][:, :, 0]
        # component 0: the band of rows at 255; component 1: the columns at 128
        a0 = int(np.flatnonzero((image == 255).any(axis=1))[0]) // rows
        a1 = int(np.flatnonzero((image == 128).all(axis=0))[0]) // cols
        a2 = int(np.argmax(obs["target"]))
        obs, reward, term, trunc, _ = env.step(np.array([a0, a1, a2]))
        total += reward
    assert total == pytest.approx(16.0) and trunc and not term


PROBE = textwrap.dedent("""
    import os, sys
    from distributed_ac.config.schema import Config
    from distributed_ac.envs.vector import probe_space
    from distributed_ac.training.startup import build_learner
    cfg = Config(env=sys.argv[1], num_envs=2, rollout_length=4, minibatch_size=8,
                 torso=sys.argv[2])
    build_learner(cfg, probe_space(cfg.env), 1)
    from tensorflow.python.util import _pywrap_util_port
    print(os.environ.get("TF_ENABLE_ONEDNN_OPTS"), _pywrap_util_port.IsMklEnabled())
""")


def _probe(env: str, torso: str = "auto", **environ) -> str:
    out = python("-c", PROBE, env, torso, env=environ_without("TF_ENABLE_ONEDNN_OPTS", **environ),
                 timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(has_nvidia_device(), reason="with a GPU the CNN runs there")
def test_a_cnn_learner_on_cpu_imports_tensorflow_with_onednn_on():
    assert _probe("distributed_ac.envs.choices:ImageVectorChoice") == "1 True"


def test_an_mlp_learner_and_a_users_setting_keep_their_onednn_choice():
    assert _probe("CartPole-v1").startswith("None ")  # TensorFlow's default for this CPU
    assert _probe("CartPole-v1", "mlp_ln").startswith("None ")  # any encoder of vectors
    assert _probe("distributed_ac.envs.choices:ImageVectorChoice",
                  TF_ENABLE_ONEDNN_OPTS="0") == "0 False"
