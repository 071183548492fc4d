"""The Python API (distributed_ac.api): a cheap import, train/load/act/evaluate/export
end to end in serial mode, and callbacks that stop a run."""

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from distributed_ac.config.schema import Config

SHORT = dict(serial=True, total_env_steps=2048, num_envs=4, num_workers=1, eval_every=0,
             seed=0)
CALLS: list = []


def stop_after_three(metrics: dict):
    """A module:attr callback: stops the run on its 3rd call."""
    CALLS.append(metrics["updates"])
    return False if len(CALLS) >= 3 else None


def test_import_is_cheap():
    code = ("import sys, distributed_ac; assert callable(distributed_ac.__getattr__); "
            "print('tensorflow' in sys.modules, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


def test_train_load_evaluate_export(tmp_path):
    import distributed_ac as dac

    seen = []
    result = dac.train(env="CartPole-v1", run_dir=tmp_path / "run",
                       callbacks=[seen.append], **SHORT)
    assert result.summary["stopped_by"] is None and seen
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    action = dac.load(result.run_dir).act(obs[None], deterministic=True)
    assert action.shape == (1,) and int(action[0]) in (0, 1)
    assert result.policy.initial_state(2) is None
    report = dac.evaluate(result.run_dir, episodes=2)
    assert report["episodes"] == 2 and len(report["returns"]) == 2
    out = dac.export(result.run_dir, tmp_path / "model")
    assert (tmp_path / "model" / "saved_model.pb").exists() and out["env"] == "CartPole-v1"


def test_callback_false_stops_the_run(tmp_path):
    import distributed_ac as dac

    calls = []
    checkpoints = []

    class Stop:
        def on_update(self, metrics):
            calls.append(metrics)
            return False if len(calls) == 3 else None

        def on_checkpoint(self, path):
            checkpoints.append(path)

    result = dac.train(env="CartPole-v1", run_dir=tmp_path / "run", callbacks=[Stop()],
                       **{**SHORT, "total_env_steps": 100_000})
    assert len(calls) == 3
    assert result.summary["stopped_by"] == "callback"
    assert result.summary["env_steps"] < 100_000
    assert result.summary["checkpoint"] and checkpoints == [result.summary["checkpoint"]]


def test_callback_by_name(tmp_path):
    import distributed_ac as dac

    name = f"{__name__}:stop_after_three"
    CALLS.clear()
    result = dac.train(env="CartPole-v1", run_dir=tmp_path / "run", callbacks=[name],
                       **{**SHORT, "total_env_steps": 100_000})
    assert len(CALLS) == 3 and result.summary["stopped_by"] == "callback"
    CALLS.clear()
    cfg = Config(env="CartPole-v1", callbacks=(name,), **{**SHORT, "total_env_steps": 100_000})
    result = dac.train(config=cfg, run_dir=tmp_path / "run2")
    assert len(CALLS) == 3 and result.summary["stopped_by"] == "callback"


def test_bad_override_is_a_usage_error():
    import distributed_ac as dac
    from distributed_ac.core.errors import UsageError

    with pytest.raises(UsageError, match="no Config field"):
        dac.train(env="CartPole-v1", not_a_field=1)


def state_arrays(tree) -> list:
    """The arrays of a nested dict / tuple, in order."""
    if isinstance(tree, dict):
        return [a for k in sorted(tree) for a in state_arrays(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [a for t in tree for a in state_arrays(t)]
    return [np.asarray(tree)]


def make_short_cartpole():
    """An env-making callable, as a user's script would pass it."""
    return gym.make("CartPole-v1", max_episode_steps=50)


def test_a_callable_env_and_a_recurrent_policy_s_state(tmp_path):
    import distributed_ac as dac

    result = dac.train(env=make_short_cartpole, run_dir=tmp_path / "run", core="gru",
                       no_preset=True, **SHORT)
    assert result.summary["env_steps"] >= 2048
    policy = result.policy
    flat = lambda state: np.concatenate(  # noqa: E731  (the state is opaque: its arrays)
        [np.ravel(a) for a in state_arrays(state)])
    assert not np.any(flat(policy.initial_state(3)))
    obs = np.stack([make_short_cartpole().reset(seed=s)[0] for s in range(3)])
    action, state = policy.act(obs, policy.initial_state(3), deterministic=True)
    moved = flat(state).copy()
    assert action.shape == (3,) and np.any(moved)  # the core's state moved on
    again, _ = policy.act(obs, None, deterministic=True)  # None: zeros, a first step
    np.testing.assert_array_equal(again, action)
    np.testing.assert_array_equal(flat(_), moved)  # the same step from the same state
    assert dac.evaluate(result.run_dir, episodes=2)["episodes"] == 2


def test_train_resumes_a_run_with_its_own_config(tmp_path):
    import distributed_ac as dac

    first = dac.train(env="CartPole-v1", run_dir=tmp_path / "run",
                      **{**SHORT, "total_env_steps": 512, "rollout_length": 16})
    assert first.summary["env_steps"] == 512
    # the resumed run's config is the saved one (rollout 16, 4 envs), the budget raised
    again = dac.train(resume=tmp_path / "run", total_env_steps=1024)
    assert again.run_dir == tmp_path / "run"
    assert again.summary["env_steps"] == 1024
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["env_steps"] for line in lines]
    assert steps == sorted(set(steps)) and steps[-1] == 1024 and 512 in steps


def test_dac_train_prints_the_summary_api_train_returns(tmp_path, capsys):
    """dac train is api.train behind its flags: the JSON line it prints is the summary."""
    from distributed_ac.commands.main import main

    assert main(["train", "--env", "CartPole-v1", "--serial", "--num-workers", "1",
                 "--num-envs", "4", "--total-env-steps", "256", "--no-preset",
                 "--run-dir", str(tmp_path / "run")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["env_steps"] == 256 and summary["run_dir"] == str(tmp_path / "run")
    assert set(summary) >= {"env_steps", "updates", "stopped_by", "checkpoint"}
