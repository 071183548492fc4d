"""`dac evaluate` and `dac export` on real short runs (serial, no Ray): evaluation reports
the returns a plain Gymnasium loop gets with the exported policy on the same fresh seeds,
and can record video; the exported SavedModel, loaded in a process that imports only
TensorFlow and NumPy, acts and values exactly like the trainer's policy, for Discrete,
MultiDiscrete and Box actions and for the shared-trunk topology."""

import json
import textwrap

import gymnasium as gym
import numpy as np
import pytest
from helpers import cli_run, python, train_quietly

from distributed_ac.acting.numpy_policy import Policy
from distributed_ac.trained.load import load_trained
from distributed_ac.config.schema import Config
from distributed_ac.core.batch import Weights
from distributed_ac.envs.vector import resolve_env_id
from distributed_ac.models.spec import ModelSpec
from distributed_ac.run import rundir

SEED = 5  # not 0, so an evaluation that dropped the training seed from its seeds shows


def short_run(tmp_path_factory, env: str, topology: str = "separate"):
    cfg = Config(env=env, seed=SEED, topology=topology, serial=True, num_workers=1, mode="sync",
                 envs_per_worker=4, rollout_length=8, hidden_sizes=(16,), total_env_steps=3 * 32)
    path = tmp_path_factory.mktemp("eval") / "run"
    train_quietly(cfg, path)
    return path


MULTI = "distributed_ac.envs.choices:MultiChoice"  # MultiDiscrete([3, 4, 5]) actions


@pytest.fixture(scope="module", params=["CartPole-v1", "Pendulum-v1", MULTI])
def run_dir(request, tmp_path_factory):
    return short_run(tmp_path_factory, request.param)


@pytest.fixture(scope="module", params=["CartPole-v1", "Pendulum-v1"])
def shared_run_dir(request, tmp_path_factory):
    return short_run(tmp_path_factory, request.param, topology="shared")


def plain_gym_returns(env_id: str, act, seeds) -> np.ndarray:
    """Undiscounted return of one episode per seed: gym.make, reset(seed), act, step."""
    env = gym.make(resolve_env_id(env_id))
    totals = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            action = act(np.asarray(obs, np.float32)[None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        totals.append(total)
    env.close()
    return np.array(totals)


def newest_checkpoint_policy(run_dir):
    """(Config, EnvSpace, Networks, NumPy Policy) of the run's newest checkpoint, restored
    here by the object names the checkpoint documents (actor, critic), not by evaluate's
    or export's loading. The networks start from another seed's initialisation, so only
    the restore can make them equal to the trained ones."""
    import tensorflow as tf

    from distributed_ac.envs.vector import probe_space
    from distributed_ac.learning.networks import build_networks

    cfg = rundir.saved_config(rundir.open_run(run_dir))
    space = probe_space(cfg.env, cfg.vectorization)
    spec = ModelSpec.of(cfg, space)
    nets = build_networks(spec, space, cfg.seed + 1)
    newest = tf.train.latest_checkpoint(str(run_dir / "checkpoints"))
    tf.train.Checkpoint(actor=nets.actor, critic=nets.critic).restore(newest).expect_partial() \
        .assert_existing_objects_matched()
    policy = Policy(space, spec)
    policy.load(Weights(0, 0, {n: [v.numpy() for v in vs] for n, vs in
                               nets.bundle((*spec.actor_parts, "v_target.encoder",
                                            "v_target.head")).items()}))
    return cfg, space, nets, policy


def test_evaluate_reports_the_returns_of_the_exported_policy_on_fresh_seeds(run_dir, tmp_path,
                                                                            capsys):
    """`dac evaluate --deterministic` against a plain Gymnasium loop that acts with the
    exported SavedModel on seeds 2**31 + training seed + i, after checking that the
    SavedModel holds the newest checkpoint's networks: a wrong seed, a wrong checkpoint or
    network, or sampling despite --deterministic changes the returns."""
    import tensorflow as tf

    episodes = 8
    code, out, err = cli_run(capsys, "evaluate", str(run_dir), "--episodes", str(episodes),
                         "--deterministic")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["episodes"] == episodes and result["deterministic"] is True
    assert result["env_steps_trained"] == 3 * 32 and result["seed"] == 2**31 + SEED
    assert f"{episodes} episodes: mean" in err

    code, _, err = cli_run(capsys, "export", str(run_dir), "--out", str(tmp_path / "policy"))
    assert code == 0, err
    model = tf.saved_model.load(str(tmp_path / "policy"))
    # evaluate and export load the run alike (evaluate.load_trained): both could be wrong
    # together, so the SavedModel is first held to the checkpoint restored independently.
    _, space, nets, trained = newest_checkpoint_policy(run_dir)
    obs = np.random.default_rng(2).normal(size=(256, space.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(model.value(obs).numpy(), nets.critic(obs).numpy()[:, 0],
                               rtol=1e-5, atol=1e-5)
    _, trained_actions, _ = trained.act(obs, None, deterministic=True)
    np.testing.assert_allclose(model.action(obs).numpy(), trained_actions, rtol=1e-5, atol=1e-5)

    act = lambda obs: model.action(obs).numpy()  # noqa: E731
    loop = lambda first: plain_gym_returns(result["env"], act,  # noqa: E731
                                           [first + i for i in range(episodes)])
    expected = loop(2**31 + SEED)
    # float32 rounding of TF's and NumPy's forward passes may differ in the last bit
    np.testing.assert_allclose(result["returns"], expected, rtol=1e-5)
    np.testing.assert_allclose([result["mean"], result["std"], result["min"], result["max"]],
                               [expected.mean(), expected.std(), expected.min(), expected.max()],
                               rtol=1e-5)
    # The comparison tells seeds apart: seeds one off, or without the training seed, differ.
    # (Three updates leave CartPole's argmax policy near constant, its returns 9 or 10, so
    # only the order of the episodes' returns can tell a seed off by one.)
    for wrong in (2**31 + SEED + 1, 2**31):
        assert not np.allclose(result["returns"], loop(wrong), rtol=1e-3), wrong


def test_evaluate_is_repeatable_on_its_fixed_seeds(run_dir, capsys):
    code, out, err = cli_run(capsys, "evaluate", str(run_dir), "--episodes", "3")
    assert code == 0, err
    code, again, _ = cli_run(capsys, "evaluate", str(run_dir), "--episodes", "3")
    assert json.loads(again.strip().splitlines()[-1]) == json.loads(out.strip().splitlines()[-1])


def test_evaluate_records_video_with_record_video(run_dir, tmp_path, capsys):
    pytest.importorskip("moviepy")
    if rundir.saved_config(rundir.open_run(run_dir)).env == MULTI:  # renders no frames
        code, _, err = cli_run(capsys, "evaluate", str(run_dir), "--video", str(tmp_path / "v"))
        assert code == 2 and "does not render rgb_array frames" in err, err
        assert len(err.strip().splitlines()) == 1
        return
    video = tmp_path / "video"
    code, _, err = cli_run(capsys, "evaluate", str(run_dir), "--episodes", "2", "--video", str(video))
    assert code == 0, err
    clips = sorted(p.name for p in video.glob("*.mp4"))
    assert clips == ["eval-episode-0.mp4", "eval-episode-1.mp4"]  # RecordVideo's schedule
    assert all((video / c).stat().st_size > 1000 for c in clips)


SERVE = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf
    model = tf.saved_model.load(sys.argv[1])
    obs = np.load(sys.argv[2])
    np.savez(sys.argv[3], action=model.action(obs).numpy(), value=model.value(obs).numpy(),
             served=model.signatures["serving_default"](obs=tf.constant(obs))["action"].numpy())
    assert not [m for m in sys.modules if m.startswith("distributed_ac")]
""")


def test_exported_saved_model_serves_the_trainers_policy_without_distributed_ac(run_dir, tmp_path,
                                                                               capsys):
    out_dir = tmp_path / "policy"
    code, out, err = cli_run(capsys, "export", str(run_dir), "--out", str(out_dir))
    assert code == 0, err
    cfg, space, learner, _ = load_trained(run_dir)
    obs = np.random.default_rng(0).normal(size=(64, space.obs_dim)).astype(np.float32)
    np.save(tmp_path / "obs.npy", obs)
    served = python("-c", SERVE, str(out_dir), str(tmp_path / "obs.npy"),
                    str(tmp_path / "served.npz"), timeout=120, cwd=tmp_path)
    assert served.returncode == 0, served.stderr[-2000:]
    got = np.load(tmp_path / "served.npz")

    policy = Policy(space, ModelSpec.of(cfg, space))
    policy.load(learner.weights())
    _, expected_action, _ = policy.act(obs, np.random.default_rng(0), deterministic=True)
    expected_value = learner.nets.critic(obs).numpy()[:, 0]
    if space.discrete:
        assert got["action"].shape == (64, *space.action_shape)
        np.testing.assert_array_equal(got["action"], expected_action)
    else:
        assert got["action"].shape == (64, space.num_actions)
        np.testing.assert_allclose(got["action"], expected_action, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got["served"], got["action"])
    np.testing.assert_allclose(got["value"], expected_value, rtol=1e-5, atol=1e-5)
    assert json.loads(out.strip().splitlines()[-1])["obs_dim"] == space.obs_dim


def test_exported_shared_trunk_policy_acts_and_values_like_the_trainers(shared_run_dir, tmp_path,
                                                                         capsys):
    import tensorflow as tf

    code, _, err = cli_run(capsys, "export", str(shared_run_dir), "--out", str(tmp_path / "policy"))
    assert code == 0, err
    cfg, space, learner, _ = load_trained(shared_run_dir)
    assert cfg.topology == "shared" and learner.nets.shared
    model = tf.saved_model.load(str(tmp_path / "policy"))
    obs = np.random.default_rng(1).normal(size=(256, space.obs_dim)).astype(np.float32)

    policy = Policy(space, ModelSpec.of(cfg, space))
    policy.load(learner.weights())
    _, expected, _ = policy.act(obs, np.random.default_rng(0), deterministic=True)
    if space.discrete:
        np.testing.assert_array_equal(model.action(obs).numpy(), expected)
        assert len(np.unique(expected)) > 1  # both actions occur: argmax really compared
    else:
        np.testing.assert_allclose(model.action(obs).numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.value(obs).numpy(), learner.nets.critic(obs).numpy()[:, 0],
                               rtol=1e-5, atol=1e-5)


def test_evaluate_and_export_refuse_a_directory_that_is_not_a_run(tmp_path, capsys):
    for argv in (["evaluate", str(tmp_path)], ["export", str(tmp_path), "--out", str(tmp_path / "o")]):
        code, _, err = cli_run(capsys, *argv)
        assert code == 2 and err.strip() == f"dac: error: {tmp_path} is not a run directory (no config.yaml)"


def test_export_will_not_write_into_a_directory_holding_other_files(run_dir, tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    code, _, err = cli_run(capsys, "export", str(run_dir), "--out", str(tmp_path))
    assert code == 2 and "holds something other than a SavedModel" in err
    assert (tmp_path / "keep.txt").read_text() == "mine"


def checkpointed_run(tmp_path):
    """A serial CartPole run of four updates that kept ckpt-2 and ckpt-4."""
    cfg = Config(seed=SEED, serial=True, num_workers=1, mode="sync", envs_per_worker=4,
                 rollout_length=8, hidden_sizes=(16,), checkpoint_every=2,
                 total_env_steps=4 * 32)
    path = tmp_path / "run"
    train_quietly(cfg, path)
    return path


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_evaluate_and_export_fall_back_to_an_older_checkpoint_when_the_newest_is_torn(
        tmp_path, capsys):
    """As a resume does; both refused the run outright."""
    run = checkpointed_run(tmp_path)
    data = next((run / "checkpoints").glob("ckpt-4.data-*"))
    data.write_bytes(data.read_bytes()[:40])
    code, out, err = cli_run(capsys, "evaluate", str(run), "--episodes", "2")
    assert code == 0, err
    assert last_json(out)["checkpoint"].endswith("ckpt-2"), out
    assert last_json(out)["env_steps_trained"] == 2 * 32
    code, out, err = cli_run(capsys, "export", str(run), "--out", str(tmp_path / "model"))
    assert code == 0, err
    assert last_json(out)["checkpoint"].endswith("ckpt-2"), out


def test_evaluate_and_export_load_the_checkpoint_that_checkpoint_names(tmp_path, capsys):
    run = checkpointed_run(tmp_path)
    for argv in (["evaluate", str(run), "--episodes", "2", "--checkpoint", "2"],
                 ["export", str(run), "--out", str(tmp_path / "model"), "--checkpoint", "2"]):
        code, out, err = cli_run(capsys, *argv)
        assert code == 0, (argv, err)
        assert last_json(out)["checkpoint"].endswith("ckpt-2"), (argv, out)
    code, _, err = cli_run(capsys, "evaluate", str(run), "--checkpoint", "3")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no checkpoint ckpt-3 in" in err and "(it holds: ckpt-2, ckpt-4)" in err, err
    code, _, err = cli_run(capsys, "evaluate", str(run), "--checkpoint", "2", "--best")
    assert code == 2 and "give one of them" in err, err


def test_a_garbled_checkpoint_state_file_does_not_hide_the_checkpoints(tmp_path, capsys):
    """TF's `checkpoint` file garbled (the checkpoints whole): evaluate said 'no checkpoint';
    the checkpoints are found by their files instead."""
    run = checkpointed_run(tmp_path)
    (run / "checkpoints" / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\nall_mo{{')
    code, out, err = cli_run(capsys, "evaluate", str(run), "--episodes", "2")
    assert code == 0, err
    assert last_json(out)["checkpoint"].endswith("ckpt-4"), out
