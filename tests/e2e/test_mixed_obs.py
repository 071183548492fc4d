"""An image beside vector entries in a Dict observation: one array per entry from the env to
the learner's graph (uint8 stays uint8), a CNN on the image and an MLP on the vector
entries on both sides, observation normalisation on the vector entries only, and a task
that needs both."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from batches import spy_on_step_inputs
from helpers import cli_train

from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.acting.worker import RolloutWorker
from distributed_ac.commands import main as cli
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Batch
from distributed_ac.core.errors import EnvError
from distributed_ac.envs.space import space_of
from distributed_ac.envs.vector import probe_space
from distributed_ac.learning import inputs
from distributed_ac.learning.learner import Learner
from distributed_ac.models.spec import ModelSpec

IMAGE_VECTOR = "distributed_ac.envs.choices:ImageVectorChoice"


def _cfg(**kw) -> Config:
    base = dict(env=IMAGE_VECTOR, envs_per_worker=3, rollout_length=4, mode="sync",
                hidden_sizes=(16,), normalize_obs=None, total_env_steps=100, seed=0)
    return Config(**{**base, **kw})


def test_the_space_reads_the_image_and_each_vector_entry_as_its_own_array():
    space = probe_space(IMAGE_VECTOR)
    assert space.mixed and space.image and space.obs_key == "image"
    assert space.obs_arrays() == {"image": ((36, 36, 1), "uint8"), "upper": ((1,), "float32")}
    assert space.vector_width == 1
    spec = ModelSpec.of(_cfg(), space)
    assert spec.mixed and spec.encoder == "nature" and spec.obs_norm  # auto: the vector part


def test_two_images_in_one_dict_are_refused_in_one_line():
    image = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    space = gym.spaces.Dict({"a": image, "b": image, "v": gym.spaces.Box(-1, 1, (2,))})

    class TwoImages(gym.Env):
        observation_space, action_space = space, gym.spaces.Discrete(2)

    with pytest.raises(EnvError, match="one image entry is supported"):
        space_of(gym.vector.SyncVectorEnv([TwoImages]), "two")


def _batch_and_learner(cfg):
    learner = Learner(cfg, probe_space(cfg.env))
    workers = [RolloutWorker(cfg, i, limit_cpus=False) for i in range(2)]
    # pickled as Ray ships them between processes, then joined as the learner joins them
    batches = [pickle.loads(pickle.dumps(w.collect(learner.weights()))) for w in workers]
    return Batch.concat(batches), learner, workers


def test_a_batch_holds_one_stacked_array_per_entry_with_its_dtype():
    batch, learner, _ = _batch_and_learner(_cfg())
    assert set(batch.obs) == {"image", "upper"}
    assert batch.obs["image"].dtype == np.uint8 and batch.obs["image"].shape == (4, 6, 36, 36, 1)
    assert batch.obs["image"].max() == 255  # real frames: a quadrant is lit
    assert batch.obs["upper"].dtype == np.float32 and batch.obs["upper"].shape == (4, 6, 1)
    assert set(np.unique(batch.obs["upper"])) <= {0.0, 1.0}
    received, step_fn = spy_on_step_inputs(learner)
    assert learner.step(batch)["applied"]
    assert received[0]["image"].dtype == np.uint8
    signature = step_fn(False).structured_input_signature[0][0]
    assert signature["image"].dtype == tf.uint8 and signature["upper"].dtype == tf.float32


def test_normalisation_reads_the_vector_entries_only_with_their_own_statistics():
    batch, learner, _ = _batch_and_learner(_cfg(normalize_obs=True))
    norm = learner.nets.obs_norm
    assert norm.mean.shape == (1,)  # the vector entries' width, not the image's pixels
    learner.step(batch)
    real = batch.mask > 0  # reset steps' observations are copies, not merged
    upper = batch.obs["upper"][real][:, 0].astype(np.float64)
    np.testing.assert_allclose(norm.mean.numpy(), [upper.mean()], atol=1e-9)
    np.testing.assert_allclose(norm.var.numpy(), [upper.var()], atol=1e-9)


def test_the_numpy_policy_matches_the_keras_networks_on_mixed_observations():
    cfg = _cfg(normalize_obs=True)
    batch, learner, workers = _batch_and_learner(cfg)
    learner.step(batch)  # statistics away from (0, 1), weights away from their init
    space = workers[0].space
    policy = Policy(space, ModelSpec.of(cfg, space))
    policy.load(learner.weights())
    obs = {k: a[0] for k, a in batch.obs.items()}  # [6, ...] per entry
    raw = {k: tf.constant(a) for k, a in obs.items()}
    network_obs = inputs.network_obs(space, learner.nets.obs_norm, raw)
    np.testing.assert_allclose(policy.forward(obs), learner.nets.actor_output(network_obs),
                               atol=1e-5)
    np.testing.assert_allclose(policy.value(obs), learner.nets.v_target(network_obs)[:, 0],
                               atol=1e-5)


def test_a_task_that_needs_the_image_and_the_vector_is_learned(tmp_path, capsys):
    """ImageVectorChoice: the image says which quadrant, the vector which half of the
    actions; the image alone scores 8 of 16 at best, the vector alone 4. The default
    preset (a Nature CNN beside an MLP) passes 12 within 24k steps; the exported model
    takes the Dict by its keys."""
    run = tmp_path / "run"
    summary, _ = cli_train(capsys, "--env", IMAGE_VECTOR, "--serial", "--num-workers", "1",
                           "--total-env-steps", "24576", "--seed", "0", "--run-dir", str(run))
    assert summary["mean_return_100"] >= 12.0, summary
    assert cli.main(["export", str(run), "--out", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    model = tf.saved_model.load(str(tmp_path / "m"))
    image = np.zeros((8, 36, 36, 1), np.uint8)
    for i in range(8):  # quadrant i % 4 lit, upper half of the actions for i >= 4
        row, col = divmod(i % 4, 2)
        image[i, row * 18:(row + 1) * 18, col * 18:(col + 1) * 18] = 255
    upper = (np.arange(8) // 4).reshape(8, 1).astype(np.float32)
    action = model.signatures["serving_default"](image=tf.constant(image),
                                                 upper=tf.constant(upper))["action"]
    assert (action.numpy() == np.arange(8)).mean() >= 0.75
