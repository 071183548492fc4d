"""The centralised critic (critic_input) end to end on MPE's simple_spread (mpe2), whose
state() the critic reads: short serial runs that train, checkpoint and resume bit for
bit, with one shared policy and with separate ones; and `dac export`, whose action
takes the agent's own observation alone."""

import json

import numpy as np
import pytest
from helpers import cli_run, quiet

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")
pytestmark = pytest.mark.e2e

SPREAD, STATEFUL = "parallel_envs:spread", "parallel_envs:StatefulRelay"


def updates_of(env: str, run_dir, updates: int, resume: bool = False, mapping=()) -> dict:
    """A serial sync run of `updates` updates of 4 copies with the centralised critic,
    checkpointing every 2 (simple_spread: 25 steps a rollout, Relay: 8)."""
    from distributed_ac.config.schema import Config
    from distributed_ac.training.trainer import train

    T = 25 if env == SPREAD else 8
    cfg = Config(env=env, serial=True, num_workers=1, mode="sync", seed=5,
                 envs_per_worker=4, rollout_length=T, hidden_sizes=(16,),
                 checkpoint_every=2, critic_input="central", policy_mapping=mapping,
                 entropy_coef=0.01, total_env_steps=updates * 4 * 3 * T,
                 # fixed schedules: auto ones fit the budget, which a resume raises
                 actor_lr_decay_steps=3, critic_lr_decay_steps=5)
    return train(cfg, run_dir=run_dir, resume=resume, progress=quiet(cfg))


@pytest.mark.parametrize("mapping", [(), ("a=first", "*=others")])
def test_a_central_critic_run_resumes_bit_for_bit(tmp_path, mapping):
    """On the scripted StatefulRelay 3 updates then a
    resume to 5 equal 5 in one go, with one shared policy and with two: the critics,
    V_target and their optimizers restored, and fed the state as the run fed them."""
    from checkpoints import checkpoint_tensors

    once = updates_of(STATEFUL, tmp_path / "once", 5, mapping=mapping)
    first = updates_of(STATEFUL, tmp_path / "split", 3, mapping=mapping)
    resumed = updates_of(STATEFUL, tmp_path / "split", 5, resume=True, mapping=mapping)
    assert first["updates"] == 3 and resumed["updates"] == once["updates"] == 5
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    # the critic's first layer reads the state (4) and the id (3), the actor's the
    # agent's observation (2) and its id
    shapes = {a[n].shape for n in a}
    assert (4 + 3, 16) in shapes and (2 + 3, 16) in shapes
    if mapping:
        assert any(n.startswith("others.Scritic_optimizer") for n in a)
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


@pytest.fixture(scope="module")
def spread_runs(tmp_path_factory) -> tuple[dict, dict]:
    """simple_spread with the state critic: 4 updates in one go, and 3 resumed to 4."""
    root = tmp_path_factory.mktemp("central")
    once = updates_of(SPREAD, root / "once", 4)
    updates_of(SPREAD, root / "split", 3)
    return once, updates_of(SPREAD, root / "split", 4, resume=True)


def test_simple_spread_trains_its_critic_on_the_54_number_state_and_resumes(spread_runs):
    from checkpoints import checkpoint_tensors

    once, resumed = spread_runs
    assert resumed["updates"] == 4 and resumed["env_steps"] == 4 * 300
    assert np.isfinite(resumed["mean_return_100"])
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    assert (54 + 3, 16) in {t.shape for t in a.values()}
    assert a.keys() == b.keys() and all(np.array_equal(a[n], b[n]) for n in a)


def test_the_export_acts_on_the_agent_s_own_observation_and_values_the_critic_s_rows(
        spread_runs, tmp_path, capsys):
    import tensorflow as tf

    code, out, err = cli_run(capsys, "export", spread_runs[1]["run_dir"], "--out",
                             str(tmp_path / "policy"))
    assert code == 0, err
    model = tf.saved_model.load(str(tmp_path / "policy"))
    inputs = model.signatures["serving_default"].structured_input_signature[1]
    assert set(inputs) == {"agent_id", "obs"} and inputs["obs"].shape.as_list() == [None, 18]
    obs = {"agent_id": np.arange(3), "obs": np.zeros((3, 18), np.float32)}
    assert model.action(obs).numpy().shape == (3,)
    value_in = model.signatures["value"].structured_input_signature[1]
    assert [s.shape.as_list() for s in value_in.values()] == [[None, 54 + 3]]
    assert model.value(np.zeros((2, 57), np.float32)).numpy().shape == (2,)
    assert json.loads(out.strip().splitlines()[-1])["obs_dim"] == 3 + 18
