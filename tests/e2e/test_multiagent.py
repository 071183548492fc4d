"""Multi-agent training end to end: `dac train` on PettingZoo envs in a child process on
an embedded local Ray, one policy shared by the agents. The agent-id feature is what
lets it learn a game whose agents must each pick their own index; `dac evaluate` and
`dac export` of a run on MPE's simple_spread (mpe2) give what a plain PettingZoo loop
gets with the exported SavedModel; what cannot be one policy's rows is refused in one
line with exit code 2."""

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from failed_runs import crash_report
from helpers import cli_run, dac_with_tests

pytest.importorskip("pettingzoo")
pytestmark = pytest.mark.e2e

MATCH_BUDGET = 60_000  # agent steps: 3 agents x 20,000 steps of the game
SPREAD = "parallel_envs:spread"


def train(*flags: str, run_dir: Path | None = None, timeout: int = 600) -> dict:
    """`dac train FLAGS` in a child that imports tests/'s envs, which must succeed: its
    summary."""
    with tempfile.TemporaryDirectory() as tmp:
        out = dac_with_tests("train", "--run-dir", str(run_dir or Path(tmp) / "run"), *flags,
                             timeout=timeout)
    assert out.returncode == 0, crash_report(out)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("agent_id", [True, False])
def test_one_shared_policy_learns_each_agent_s_own_action_only_with_the_agent_id(agent_id):
    """MatchId pays the team each agent's pick of its own index: 8 an episode at best,
    8 / 3 in expectation for any policy that cannot tell the agents apart. With the
    agent-id one-hot the default settings get past 7 within the budget (seed 0 read
    7.93 at 61,440 agent steps); without it they stay near 8 / 3 (2.85)."""
    summary = train("--env", "parallel_envs:MatchId", "--num-workers", "1", "--seed", "0",
                    "--total-env-steps", str(MATCH_BUDGET),
                    *([] if agent_id else ["--no-agent-id"]))
    assert summary["env_steps"] <= MATCH_BUDGET + 8 * 3 * 256
    if agent_id:
        assert summary["mean_return_100"] >= 7.0, summary
    else:
        assert summary["mean_return_100"] < 4.0, summary


@pytest.fixture(scope="module")
def spread_run(tmp_path_factory) -> tuple[Path, dict]:
    """A short simple_spread run on two Ray workers (3 agents x 2 copies each), with an
    evaluation during training (an evaluator actor playing every agent)."""
    pytest.importorskip("mpe2")
    run = tmp_path_factory.mktemp("spread") / "run"
    summary = train("--env", SPREAD, "--num-workers", "2", "--num-envs", "4", "--no-preset",
                    "--rollout-length", "25", "--hidden-sizes", "16", "--seed", "3",
                    "--eval-every", "2", "--eval-episodes", "2",
                    "--total-env-steps", str(3 * 4 * 25 * 3), run_dir=run)
    return run, summary


def test_agents_of_copies_on_two_ray_workers_are_rows_of_one_learner_batch(spread_run):
    _, summary = spread_run
    assert summary["workers"] == 2 and summary["env_steps"] == 3 * 4 * 25 * 3
    # 75 steps a copy: episodes end at its steps 24 and 50 (each followed by the reset
    # step), each ending one per-agent episode for each of its 3 agents
    assert summary["episodes"] == 2 * 4 * 3
    assert summary["eval_best_mean_return"] < 0  # simple_spread's rewards are distances


def spread_returns(act, seeds) -> np.ndarray:
    """Per seed, the mean over the agents of their undiscounted returns in one episode of
    simple_spread, played by a plain PettingZoo loop: act() maps the agents' rows, each
    its observation and its index in possible_agents, to their actions."""
    import parallel_envs

    env = parallel_envs.spread()
    means = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        totals = dict.fromkeys(env.possible_agents, 0.0)
        while env.agents:
            rows = {"obs": np.stack([obs[a] for a in env.possible_agents]),
                    "agent_id": np.arange(3, dtype=np.int64)}
            actions = act(rows)
            obs, rewards, _, _, _ = env.step({a: actions[j] for j, a in
                                              enumerate(env.possible_agents) if a in env.agents})
            for a, r in rewards.items():
                totals[a] += r
        means.append(np.mean(list(totals.values())))
    env.close()
    return np.array(means)


def test_evaluate_and_export_play_every_agent_with_the_shared_policy(spread_run, tmp_path,
                                                                     capsys):
    """`dac evaluate --deterministic` reports, per episode, the agents' mean return that
    a plain PettingZoo loop acting with the exported SavedModel gets on the same seeds.
    The SavedModel reads the observation's entries as the env gives them: the agent's
    observation and its index (the one-hot is made inside)."""
    import tensorflow as tf

    run, _ = spread_run
    code, out, err = cli_run(capsys, "evaluate", str(run), "--episodes", "4", "--deterministic")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    code, out, err = cli_run(capsys, "export", str(run), "--out", str(tmp_path / "policy"))
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1])["obs_dim"] == 3 + 18
    model = tf.saved_model.load(str(tmp_path / "policy"))
    got = spread_returns(lambda rows: model.action(rows).numpy(),
                         [result["seed"] + i for i in range(4)])
    np.testing.assert_allclose(result["returns"], got, rtol=1e-5)
    assert len(set(np.round(got, 4))) > 1  # seeds that give one return could not tell


@pytest.mark.parametrize("env, flags, needle", [
    ("parallel_envs:not_an_env", [], "made a dict, not a Gymnasium Env nor a PettingZoo"),
    ("parallel_envs:Mismatched", [], "the agents' action spaces differ (agent_0: Discrete(3), "
                                     "agent_1: Box"),
    ("parallel_envs:Unequal", ["--ignore-action-mask"], "ignore_action_mask would let"),
    ("parallel_envs:TakingTurns", [], "does not set is_parallelizable"),
    ("parallel_envs:MatchId", ["--vectorization", "async"], "vectorization auto or sync"),
])
def test_what_cannot_be_one_policy_s_rows_is_one_line_exit_2(env, flags, needle, tmp_path):
    out = dac_with_tests("train", "--env", env, *flags, "--run-dir", str(tmp_path / "run"))
    assert out.returncode == 2, crash_report(out)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dac: error: ") and needle in lines[0], lines
    assert not (tmp_path / "run").exists()


def relay_updates(run_dir: Path, updates: int, resume: bool = False,
                  mapping: tuple[str, ...] = ()) -> dict:
    """A serial sync run of `updates` updates of Relay's rows (4 copies x 3 agents x 8
    steps each), checkpointing every 2; `mapping`: its policy_mapping."""
    from helpers import quiet

    from distributed_ac.config.schema import Config
    from distributed_ac.training.trainer import train

    cfg = Config(env="parallel_envs:Relay", serial=True, num_workers=1, mode="sync", seed=7,
                 envs_per_worker=4, rollout_length=8, hidden_sizes=(16,), checkpoint_every=2,
                 actor_lr_decay_steps=3, critic_lr_decay_steps=5, entropy_coef=0.01,
                 total_env_steps=updates * 4 * 3 * 8, policy_mapping=mapping)
    return train(cfg, run_dir=run_dir, resume=resume, progress=quiet(cfg))


@pytest.mark.parametrize("mapping", [(), ("a=first", "*=others")])
def test_a_resumed_multi_agent_run_equals_one_run_in_one_go_bit_for_bit(tmp_path, mapping):
    """The serial pool rebuilds its workers by replaying their actions, rows included:
    3 updates, then a resume to 5, equals 5 in one go (an off-grid checkpoint), with one
    shared policy and with two separate ones (each its own networks and optimizers)."""
    from checkpoints import checkpoint_tensors

    once = relay_updates(tmp_path / "once", 5, mapping=mapping)
    first = relay_updates(tmp_path / "split", 3, mapping=mapping)
    resumed = relay_updates(tmp_path / "split", 5, resume=True, mapping=mapping)
    assert first["updates"] == 3 and resumed["updates"] == once["updates"] == 5
    a, b = checkpoint_tensors(once), checkpoint_tensors(resumed)
    prefix = "first.S" if mapping else ""  # a checkpoint key spells the name's / as .S
    assert a.keys() == b.keys() and any(n.startswith(prefix + "v_target") for n in a)
    if mapping:
        assert any(n.startswith("others.Sactor_optimizer") for n in a)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert resumed["episodes"] == once["episodes"]


def test_separate_policies_each_learn_their_agent_s_action_without_the_agent_id():
    """Without the agent id one shared policy cannot tell MatchId's agents apart (the
    test above: 2.85); a policy per agent needs no id, each learning its own agent's
    index (seed 0 read 7.99 at 61,440 agent steps)."""
    summary = train("--env", "parallel_envs:MatchId", "--num-workers", "1", "--seed", "0",
                    "--total-env-steps", str(MATCH_BUDGET), "--no-agent-id",
                    "--policy-mapping", "agent_0=p0", "agent_1=p1", "agent_2=p2")
    assert summary["mean_return_100"] >= 7.0, summary


@pytest.mark.parametrize("mapping", [(), ("pair=p_pair", "quad=p_quad")])
def test_agents_whose_spaces_differ_learn_through_padded_rows(mapping):
    """Unequal's agents pick one of 2 and one of 4 actions from one-hots of 2 and 4: padded
    to one row space with the missing choices masked, one shared policy and a policy
    each both learn to read their targets (seed 0 read 7.87 and 7.94 of 8 at 40,960
    agent steps, where uniform choices score 3)."""
    flags = ("--policy-mapping", *mapping) if mapping else ()
    summary = train("--env", "parallel_envs:Unequal", "--num-workers", "1", "--seed", "0",
                    "--total-env-steps", "40000", *flags)
    assert summary["mean_return_100"] >= 7.0, summary


def test_mpe_world_comm_trains_its_leader_s_20_actions_beside_the_others_5_and_evaluates(
        tmp_path, capsys):
    """MPE's simple_world_comm: six agents, observations of 34 and 28 entries, the lead
    adversary's 20 actions beside the others' 5, padded to one row space (masks on the
    others' 15 missing choices) and trained with a policy per team on a Ray worker; `dac
    evaluate` plays every agent back through the same padding."""
    pytest.importorskip("mpe2")
    run = tmp_path / "run"
    summary = train("--env", "mpe2.simple_world_comm_v3:parallel_env", "--num-workers", "1",
                    "--num-envs", "2", "--rollout-length", "25", "--hidden-sizes", "16",
                    "--policy-mapping", "*adversary_*=adversaries", "agent_*=agents",
                    "--total-env-steps", str(2 * 6 * 2 * 25), run_dir=run)
    assert summary["updates"] == 2 and summary["nonfinite_batches"] == 0, summary
    code, out, err = cli_run(capsys, "evaluate", str(run), "--episodes", "2")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert set(result["policy_means"]) == {"adversaries", "agents"}, result


@pytest.fixture(scope="module")
def two_policy_run(tmp_path_factory) -> Path:
    """simple_spread on two Ray workers with agent_0's policy apart from the others'."""
    pytest.importorskip("mpe2")
    run = tmp_path_factory.mktemp("two") / "run"
    summary = train("--env", SPREAD, "--num-workers", "2", "--num-envs", "4", "--no-preset",
                    "--rollout-length", "25", "--hidden-sizes", "16", "--seed", "3",
                    "--policy-mapping", "agent_0=lead", "agent_*=rest",
                    "--total-env-steps", str(3 * 4 * 25 * 3), "--log-every-s", "0.01",
                    run_dir=run)
    assert summary["updates"] == 3
    return run


def test_each_policy_logs_its_own_agents_returns_and_losses(two_policy_run):
    rows = [json.loads(line) for line in (two_policy_run / "metrics.jsonl").read_text().splitlines()]
    keys = set().union(*rows)
    for policy in ("lead", "rest"):
        assert {f"losses/actor/{policy}", f"losses/critic/{policy}",
                f"charts/episodic_return/{policy}"} <= keys


def test_two_policies_evaluate_and_export_as_a_plain_loop_plays_them(two_policy_run,
                                                                     tmp_path, capsys):
    """`dac evaluate --deterministic` gives what a plain PettingZoo loop gets acting for
    agent_0 with the SavedModel of `--policy lead` and for the others with `rest`'s; the
    two policies are different networks."""
    import tensorflow as tf

    run = two_policy_run
    code, out, err = cli_run(capsys, "evaluate", str(run), "--episodes", "3", "--deterministic")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert set(result["policy_means"]) == {"lead", "rest"}
    models = {}
    for policy in ("lead", "rest"):
        code, out, err = cli_run(capsys, "export", str(run), "--out", str(tmp_path / policy),
                                 "--policy", policy)
        assert code == 0, err
        models[policy] = tf.saved_model.load(str(tmp_path / policy))

    def act(rows):
        lead, rest = (models[p].action(rows).numpy() for p in ("lead", "rest"))
        return np.concatenate([lead[:1], rest[1:]])

    got = spread_returns(act, [result["seed"] + i for i in range(3)])
    np.testing.assert_allclose(result["returns"], got, rtol=1e-5)
    rows = {"obs": np.random.default_rng(0).normal(size=(3, 18)).astype(np.float32),
            "agent_id": np.arange(3, dtype=np.int64)}
    assert not np.allclose(models["lead"].value(rows).numpy(), models["rest"].value(rows).numpy())


def test_export_of_a_two_policy_run_needs_the_policy_named_in_one_line(two_policy_run,
                                                                       tmp_path, capsys):
    code, _, err = cli_run(capsys, "export", str(two_policy_run), "--out", str(tmp_path / "p"))
    assert code == 2 and "name one of lead, rest" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("mapping, needle", [
    (["agent_0=lead"], "agent 'agent_1' of 'parallel_envs:spread' matches no policy_mapping"),
    (["agent_*=all", "pilot=p"], "entry pilot=p names no agent"),
])
def test_a_mapping_that_misses_or_invents_an_agent_is_one_line_exit_2(mapping, needle, tmp_path):
    pytest.importorskip("mpe2")
    out = dac_with_tests("train", "--env", SPREAD, "--policy-mapping", *mapping,
                         "--run-dir", str(tmp_path / "run"))
    assert out.returncode == 2 and "Traceback" not in out.stderr, crash_report(out)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert not (tmp_path / "run").exists()

