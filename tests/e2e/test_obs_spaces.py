"""Observation spaces users' envs bring: bare Discrete, MultiDiscrete and MultiBinary
observations, Text entries (left out with one line, or a hashed bag of words), Boxes of
every rank, and the refusal of spaces with no fixed width. Each reading is checked
against a hand-built array, then learned, exported and evaluated through the real CLI."""

import json
import zlib

import gymnasium as gym
import numpy as np
import pytest
from fakes import SpaceSample
from helpers import cli_train

from distributed_ac.commands import main as cli
from distributed_ac.core.errors import EnvError
from distributed_ac.envs import structured
from distributed_ac.envs.space import space_of
from distributed_ac.envs.vector import make_vector_env, probe_space

CHOICES = "distributed_ac.envs.obs_choices"


def _space_and_batch(space, n=3):
    venv = gym.vector.SyncVectorEnv([lambda: SpaceSample(space)] * n)
    obs, _ = venv.reset(seed=0)
    got = space_of(venv, "obs", text_obs="hash")
    return got, obs, got.as_batch(obs, n)


def test_a_bare_discrete_observation_is_one_hot():
    venv = make_vector_env("FrozenLake-v1", 4)
    space = space_of(venv, "FrozenLake-v1")
    obs, _ = venv.reset(seed=0)
    obs, *_ = venv.step(np.array([2, 1, 2, 1]))
    got = space.as_batch(obs, 4)
    assert space.obs_shape == (16,) and got.dtype == np.float32
    for row, index in zip(got, obs):
        want = np.zeros(16, np.float32)
        want[index] = 1.0
        np.testing.assert_array_equal(row, want)


def test_multi_discrete_observations_are_one_hot_per_component_with_their_starts():
    space, obs, got = _space_and_batch(gym.spaces.MultiDiscrete([[2, 3], [4, 1]],
                                                                start=[[1, 0], [-2, 5]]))
    assert got.shape == (3, 10)
    for row, values in zip(got, obs):
        pieces = []
        for n, start, v in zip((2, 3, 4, 1), (1, 0, -2, 5), values.ravel()):
            piece = [0.0] * n
            piece[v - start] = 1.0
            pieces += piece
        np.testing.assert_array_equal(row, pieces)


def test_multi_binary_observations_are_their_bits():
    space, obs, got = _space_and_batch(gym.spaces.MultiBinary((2, 3)))
    np.testing.assert_array_equal(got, obs.reshape(3, 6).astype(np.float32))


def test_text_entries_are_left_out_by_default_and_named():
    space = probe_space(f"{CHOICES}:TextChoice")
    assert space.obs_key == "level" and space.obs_shape == (1,)  # the one Box left, as it is
    assert space.dropped == ("'mission' (Text)",)


def test_a_hashed_text_entry_counts_each_lower_cased_word_in_its_crc32_bucket():
    words = "Go to the door the"
    want = np.zeros(structured.TEXT_BUCKETS, np.float32)
    for w in ("go", "to", "the", "door", "the"):
        want[zlib.crc32(w.encode()) % structured.TEXT_BUCKETS] += 1
    got = structured.bag_of_words((words, ""), 2)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], np.zeros(structured.TEXT_BUCKETS))
    assert got[0].sum() == 5  # distinct words may share a bucket, never a count


@pytest.mark.parametrize("shape,dtype,want_shape,want_dtype", [
    ((5,), np.float32, (5,), "float32"),
    ((8, 6), np.uint8, (8, 6, 1), "uint8"),  # a frame of one channel
    ((8, 6), np.bool_, (8, 6, 1), "float32"),
    ((8, 6), np.float32, (48,), "float32"),  # a table of features, flattened
    ((2, 6), np.uint8, (12,), "float32"),  # too small for a 3x3 convolution
    ((6, 6, 2), np.bool_, (6, 6, 2), "float32"),  # MinAtar's kind: 0/1 floats
    ((10, 10, 3), np.uint8, (10, 10, 3), "uint8"),
    ((2, 3, 4, 5), np.float32, (120,), "float32"),
])
def test_boxes_of_every_rank(shape, dtype, want_shape, want_dtype):
    high = 1 if dtype == np.bool_ else 255
    space, obs, got = _space_and_batch(gym.spaces.Box(0, high, shape, dtype))
    assert space.obs_shape == want_shape and space.obs_dtype == want_dtype
    assert got.shape == (3, *want_shape) and got.dtype == want_dtype
    np.testing.assert_array_equal(got.reshape(3, -1), obs.reshape(3, -1).astype(want_dtype))


@pytest.mark.parametrize("space,message", [
    (gym.spaces.Graph(gym.spaces.Box(0, 1, (2,)), None), "observation space Graph"),
    (gym.spaces.Dict({"s": gym.spaces.Sequence(gym.spaces.Discrete(3)),
                      "v": gym.spaces.Box(-1, 1, (2,))}), "entry 's' of space Sequence"),
])
def test_spaces_with_no_fixed_width_are_refused_in_one_line(space, message):
    with pytest.raises(EnvError, match=message):
        space_of(gym.vector.SyncVectorEnv([lambda: SpaceSample(space)]), "obs")


def test_a_text_only_observation_without_hashing_is_refused_in_one_line():
    space = gym.spaces.Dict({"mission": gym.spaces.Text(8)})
    venv = gym.vector.SyncVectorEnv([lambda: SpaceSample(space)])
    with pytest.raises(EnvError, match="no observation entry .* --text-obs hash"):
        space_of(venv, "obs")
    assert space_of(venv, "obs", text_obs="hash").obs_shape == (structured.TEXT_BUCKETS,)


# ---- learned, exported and evaluated through the CLI ---------------------------------
QUICK = ["--serial", "--num-workers", "1", "--num-envs", "16", "--rollout-length", "16",
         "--hidden-sizes", "32", "--policy-loss", "clip", "--update-epochs", "4",
         "--minibatch-size", "64", "--actor-lr", "3e-3", "--critic-lr", "3e-3", "--seed", "0"]


def _train(capsys, tmp_path, env, steps, *extra):
    run = tmp_path / "run"
    summary, err = cli_train(capsys, "--env", f"{CHOICES}:{env}", *QUICK, "--total-env-steps",
                             str(steps), "--run-dir", str(run), *extra, err_tail=2000)
    return run, summary, err


def _evaluate(capsys, run) -> float:
    assert cli.main(["evaluate", str(run), "--episodes", "4", "--deterministic"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])["mean"]


def _exported(capsys, run, tmp_path):
    import tensorflow as tf

    assert cli.main(["export", str(run), "--out", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    return tf.saved_model.load(str(tmp_path / "m")).signatures["serving_default"]


@pytest.mark.parametrize("env", ["IndexChoice", "PairChoice"])
def test_tasks_read_from_integer_observations_are_learned_exported_and_evaluated(
        env, capsys, tmp_path):
    """A uniform policy scores 2; reading the observation, 16."""
    import tensorflow as tf

    run, summary, _ = _train(capsys, tmp_path, env, 24_064)
    assert summary["mean_return_100"] >= 15.0, summary
    assert _evaluate(capsys, run) >= 15.0
    serve = _exported(capsys, run, tmp_path)
    if env == "IndexChoice":  # the bare Discrete(8, start=2) as the one input "obs"
        action = serve(obs=tf.constant(np.arange(2, 10), tf.int64))["action"].numpy()
        want = np.arange(8)
    else:
        pairs = np.stack(np.divmod(np.arange(8), 4), axis=1)
        action = serve(obs=tf.constant(pairs, tf.int64))["action"].numpy()
        want = np.arange(8)
    assert (action == want).mean() >= 0.875, action


def test_a_task_told_in_text_is_learned_from_the_hashed_words_and_not_without(
        capsys, tmp_path):
    """TextChoice: the direction is only in the mission; left out, 4 of 16 at best."""
    _, dropped, err = _train(capsys, tmp_path / "drop", "TextChoice", 12_032)
    assert "left out of what the networks read: 'mission' (Text)" in err
    assert dropped["mean_return_100"] <= 6.0, dropped
    run, hashed, _ = _train(capsys, tmp_path / "hash", "TextChoice", 24_064, "--text-obs", "hash")
    assert hashed["mean_return_100"] >= 15.0, hashed
    assert _evaluate(capsys, run) >= 15.0


@pytest.mark.parametrize("env,shape,lit", [("GridChoice", (6, 6, 2), 1),
                                           ("FrameChoice", (8, 8, 1), 255)])
def test_small_images_are_read_by_the_small_cnn_learned_exported_and_evaluated(
        env, shape, lit, capsys, tmp_path):
    """A bool 6 x 6 x 2 grid and a rank-2 8 x 8 frame: torso auto picks the small CNN
    (the Nature CNN needs 36 x 36); a uniform policy scores 4 of 16."""
    import tensorflow as tf

    run, summary, _ = _train(capsys, tmp_path, env, 12_032)
    assert summary["torso"] == "small" and summary["mean_return_100"] >= 15.0, summary
    assert _evaluate(capsys, run) >= 15.0
    images = np.zeros((4, *shape), np.float32 if lit == 1 else np.uint8)
    half = shape[0] // 2
    for q in range(4):  # quadrant q lit in channel 0: the right action is q
        row, col = divmod(q, 2)
        images[q, row * half:(row + 1) * half, col * half:(col + 1) * half, 0] = lit
    serve = _exported(capsys, run, tmp_path)
    np.testing.assert_array_equal(serve(obs=tf.constant(images))["action"].numpy(), np.arange(4))


def test_dac_train_refuses_a_graph_observation_in_one_line_with_exit_2(capsys, tmp_path):
    code = cli.main(["train", "--env", "fakes:GraphObs", "--serial",
                     "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("dac: error: ") and "observation space Graph" in err[-1], err
    assert not (tmp_path / "run").exists()  # a bad env leaves no run directory behind


def test_an_action_mask_given_in_info_is_read_as_the_observations_mask():
    """Taxi gives its mask (the actions that change the state) in info: with
    info_action_mask the policy reads it from the Dict {"obs", "action_mask"}."""
    from distributed_ac.envs.atari import Preprocess

    venv = make_vector_env("Taxi-v4", 3, preprocess=Preprocess(info_mask=True))
    space = space_of(venv, "Taxi-v4")
    assert space.mask_size == 6 and space.obs_shape == (500,)
    obs, info = venv.reset(seed=1)
    for _ in range(3):  # the masks are the env's own, step after step
        np.testing.assert_array_equal(space.action_masks(obs, 3), info["action_mask"] > 0)
        np.testing.assert_array_equal(space.as_batch(obs, 3), np.eye(500)[obs["obs"]])
        obs, _, _, _, info = venv.step(np.array([0, 1, 4]))


def test_info_action_mask_on_an_env_without_one_is_one_line(capsys, tmp_path):
    code = cli.main(["train", "--env", "CartPole-v1", "--info-action-mask", "--serial",
                     "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("dac: error: "), err
    assert "info has no 'action_mask'" in err[-1]


def test_taxi_with_its_shipped_preset_nears_the_optimum_of_7_93(capsys, tmp_path):
    """presets/Taxi-v4.yaml reads the mask from info; without it, -200 at 1M."""
    code = cli.main(["train", "--env", "Taxi-v4", "--serial", "--seed", "0",
                     "--total-env-steps", "400000", "--run-dir", str(tmp_path / "run")])
    out = capsys.readouterr()
    assert code == 0, out.err[-2000:]
    assert "tuned settings for Taxi-v4" in out.err
    assert json.loads(out.out.strip().splitlines()[-1])["mean_return_100"] >= 6.0
