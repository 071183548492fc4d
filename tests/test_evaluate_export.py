"""`dac evaluate` and `dac export` on real short runs (serial, no Ray): evaluation reports
mean/std/min/max on fresh seeds and can record video; the exported SavedModel, loaded in
a process that imports only TensorFlow and NumPy, acts and values exactly like the
trainer's policy, for Discrete and Box actions."""

import io
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from distributed_ac import cli
from distributed_ac.config import Config
from distributed_ac.evaluate import load_trained
from distributed_ac.metrics import ConsoleProgress
from distributed_ac.policy import Policy
from distributed_ac.train import train


@pytest.fixture(scope="module", params=["CartPole-v1", "Pendulum-v1"])
def run_dir(request, tmp_path_factory):
    cfg = Config(env=request.param, serial=True, num_workers=1, mode="sync", envs_per_worker=4,
                 rollout_length=8, hidden_sizes=(16,), total_env_steps=3 * 32)
    path = tmp_path_factory.mktemp("eval") / "run"
    train(cfg, run_dir=path, progress=ConsoleProgress(cfg.total_env_steps, 1.0, io.StringIO()))
    return path


def dac(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_evaluate_prints_mean_std_min_max_over_the_requested_episodes(run_dir, capsys):
    code, out, err = dac(capsys, "evaluate", str(run_dir), "--episodes", "5", "--deterministic")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["episodes"] == 5 and result["deterministic"] is True
    assert result["min"] <= result["mean"] <= result["max"] and result["std"] >= 0
    assert result["env_steps_trained"] == 3 * 32 and result["seed"] >= 2**31
    assert "5 episodes: mean" in err
    # fresh but fixed seeds: the same evaluation twice gives the same returns
    code, again, _ = dac(capsys, "evaluate", str(run_dir), "--episodes", "5", "--deterministic")
    assert json.loads(again.strip().splitlines()[-1]) == result


def test_evaluate_records_video_with_record_video(run_dir, tmp_path, capsys):
    pytest.importorskip("moviepy")
    video = tmp_path / "video"
    code, _, err = dac(capsys, "evaluate", str(run_dir), "--episodes", "2", "--video", str(video))
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
    code, out, err = dac(capsys, "export", str(run_dir), "--out", str(out_dir))
    assert code == 0, err
    cfg, space, learner, _ = load_trained(run_dir)
    obs = np.random.default_rng(0).normal(size=(64, space.obs_dim)).astype(np.float32)
    np.save(tmp_path / "obs.npy", obs)
    served = subprocess.run([sys.executable, "-c", SERVE, str(out_dir), str(tmp_path / "obs.npy"),
                             str(tmp_path / "served.npz")], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert served.returncode == 0, served.stderr[-2000:]
    got = np.load(tmp_path / "served.npz")

    policy = Policy(space, cfg.activation)
    policy.load(learner.weights())
    _, expected_action, _ = policy.act(obs, np.random.default_rng(0), deterministic=True)
    expected_value = learner.nets.critic(obs).numpy()[:, 0]
    if space.discrete:
        np.testing.assert_array_equal(got["action"], expected_action)
    else:
        assert got["action"].shape == (64, space.num_actions)
        np.testing.assert_allclose(got["action"], expected_action, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got["served"], got["action"])
    np.testing.assert_allclose(got["value"], expected_value, rtol=1e-5, atol=1e-5)
    assert json.loads(out.strip().splitlines()[-1])["obs_dim"] == space.obs_dim


def test_evaluate_and_export_refuse_a_directory_that_is_not_a_run(tmp_path, capsys):
    for argv in (["evaluate", str(tmp_path)], ["export", str(tmp_path), "--out", str(tmp_path / "o")]):
        code, _, err = dac(capsys, *argv)
        assert code == 2 and err.strip() == f"dac: error: {tmp_path} is not a run directory (no config.yaml)"


def test_export_will_not_write_into_a_directory_holding_other_files(run_dir, tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    code, _, err = dac(capsys, "export", str(run_dir), "--out", str(tmp_path))
    assert code == 2 and "holds something other than a SavedModel" in err
    assert (tmp_path / "keep.txt").read_text() == "mine"
