"""`dac tune`: the search space and its checks, trials as real training runs reporting
and checkpointing through Tune, PBT's exploit, resume, and the outputs."""

import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from distributed_ac.commands.main import main
from distributed_ac.config.schema import Config, load_yaml
from distributed_ac.core.errors import ConfigError, UsageError
from distributed_ac.tuning.space import TRAIN_METRIC, default_metric, parse_space
from distributed_ac.tuning.spec import TuneSpec

TESTS = os.path.dirname(__file__)
SPACE = {"actor_lr": {"loguniform": [1e-4, 1e-2]}, "entropy_coef": {"choice": [0.0, 0.01]},
         "gamma": {"uniform": [0.95, 0.999]}, "num_envs": {"grid": [8, 16]}}


def write(tmp_path: Path, name: str, data) -> str:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(p)


# ---- the space ------------------------------------------------------------------------

def test_a_space_of_each_kind_parses_with_ints_drawn_for_int_fields():
    space = parse_space({**SPACE, "rollout_length": {"uniform": [8, 32]}}, Config())
    assert {n: d.kind for n, d in space.items()} == {
        "actor_lr": "loguniform", "entropy_coef": "choice", "gamma": "uniform",
        "num_envs": "grid", "rollout_length": "uniform"}
    assert space["actor_lr"].values == (1e-4, 1e-2) and not space["actor_lr"].integer
    assert space["rollout_length"].integer and space["num_envs"].values == (8, 16)


@pytest.mark.parametrize("data, names", [
    ({"actor_lrr": {"choice": [1e-3]}}, "unknown config field(s): actor_lrr"),
    ({}, "is empty"),
    (None, "is empty"),
    ({"gamma": {"normal": [0, 1]}}, "gamma must be one of"),
    ({"gamma": {"uniform": [0.99, 0.9]}}, "low < high"),
    ({"gamma": {"uniform": [0.9, 1.5]}}, "gamma must be in [0, 1]"),
    ({"actor_lr": {"loguniform": [0, 1e-2]}}, "low > 0"),
    ({"num_envs": {"uniform": [8.5, 16]}}, "bounds must be ints"),
    ({"activation": {"choice": ["tanh", "cosine"]}}, "activation"),
    ({"serial": {"choice": [True, False]}}, "cannot be searched over"),
])
def test_a_bad_space_is_one_config_error_naming_the_problem(data, names):
    with pytest.raises(ConfigError) as e:
        parse_space(data, Config(), where="space.yaml")
    assert names in str(e.value) and "\n" not in str(e.value)


def test_the_default_metric_is_the_training_mean_without_evaluation_and_eval_with_it():
    assert default_metric(Config()) == TRAIN_METRIC

    # a config that evaluates during training (the field a later version may add)
    evaluating = types.SimpleNamespace(**dataclasses.asdict(Config()), eval_every=10)
    assert default_metric(evaluating) == "eval/mean_return"
    spec = TuneSpec(base=Config(), space=parse_space(SPACE, Config()), metric="eval/mean_return")
    with pytest.raises(UsageError, match="do not evaluate"):
        spec.check()


@pytest.mark.parametrize("extra, space, says", [
    ([], {"actor_lrr": {"choice": [1e-3]}}, "unknown config field(s): actor_lrr"),
    ([], {}, "is empty"),
    (["--metric", "charts/no_such_metric"], SPACE, "--metric charts/no_such_metric: no trial "
                                                   "reports it"),
    (["--scheduler", "pbt"], SPACE, "cannot perturb grid dimensions (num_envs)"),
    (["--scheduler", "pbt"], {"hidden_sizes": {"choice": [[32], [64]]}}, "cannot vary the network"),
    (["--num-samples", "0"], SPACE, "--num-samples must be >= 1"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_trial(tmp_path, capsys, extra, space, says):
    exp = tmp_path / "exp"
    code = main(["tune", "--space", write(tmp_path, "space.yaml", space),
                 "--exp-dir", str(exp), *extra])
    err = capsys.readouterr().err
    assert code == 2 and says in err and err.count("\n") == 1, err
    assert not exp.exists()  # refused before anything was written or started
    assert "ray" not in sys.modules or "ray.tune" not in sys.modules


def test_a_missing_space_and_a_resume_of_no_experiment_are_refused(tmp_path, capsys):
    assert main(["tune"]) == 2
    assert "needs --space" in capsys.readouterr().err
    assert main(["tune", "--resume", str(tmp_path)]) == 2
    assert "is not a dac tune experiment" in capsys.readouterr().err


# ---- new rates without a rebuild (PBT's explore) ----------------------------------------

def test_set_rates_makes_the_next_update_the_one_a_learner_built_with_them_makes():
    from distributed_ac.acting.worker import RolloutWorker
    from distributed_ac.learning.learner import Learner

    base = Config(envs_per_worker=8, rollout_length=8, total_env_steps=10_000, actor_lr=1e-3,
                  critic_lr=1e-3, entropy_coef=0.0, actor_lr_decay_steps=4)
    new = dataclasses.replace(base, actor_lr=5e-2, critic_lr=2e-2, entropy_coef=0.5)
    worker = RolloutWorker(base, limit_cpus=False)
    changed, built = Learner(base, worker.space), Learner(new, worker.space)
    batch = worker.collect(changed.weights())
    changed.step(batch)  # traced with the old rates
    built.step(batch)
    traced = changed._train_steps[False].experimental_get_tracing_count()
    # the two learners now differ only by their rates; make them equal by assignment
    for a, b in zip(built.nets.actor.variables + built.nets.critic.variables,
                    changed.nets.actor.variables + changed.nets.critic.variables):
        a.assign(b)
    for a, b in zip(built.optimizers.variables, changed.optimizers.variables):
        a.assign(b)
    changed.set_rates(new.actor_lr, new.critic_lr, new.entropy_coef)
    batch = worker.collect(changed.weights())
    m_changed, m_built = changed.step(batch), built.step(batch)
    assert m_changed["learning_rate_actor"] == pytest.approx(5e-2 * 0.5 ** (1 / 4), rel=1e-5)
    assert m_changed["learning_rate_critic"] == pytest.approx(m_built["learning_rate_critic"])
    for a, b in zip(changed.nets.actor.variables + changed.nets.critic.variables,
                    built.nets.actor.variables + built.nets.critic.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    assert changed._train_steps[False].experimental_get_tracing_count() == traced


# ---- a trial: reports, checkpoints, PBT's exploit ----------------------------------------

def actor_arrays(learner):
    return [v.numpy().copy() for v in learner.nets.actor.variables + learner.nets.critic.variables]


def test_an_exploit_restores_another_trials_weights_into_a_kept_learner_with_new_rates(tmp_path):
    from fakes import FakeTuneSession

    from distributed_ac.tuning import trial

    base = Config(num_envs=8, rollout_length=16, total_env_steps=1024, mode="sync")
    spec = TuneSpec(base=base, space=parse_space({"actor_lr": {"choice": [1e-3, 3e-2]},
                                                  "entropy_coef": {"choice": [0.0, 0.5]}},
                                                 base), metric=TRAIN_METRIC, report_every=2)
    a = FakeTuneSession(tmp_path / "a")
    trial.run_trial({"actor_lr": 1e-3, "entropy_coef": 0.0}, spec, a)
    assert [m["updates"] for m, _ in a.reports] == [2, 4, 6, 8]
    last = a.reports[-1][1]  # the project's checkpoint format: TF tensors and the config
    assert sorted(p.name for p in (last / "checkpoints").iterdir()) == [
        "checkpoint", "ckpt-8.data-00000-of-00001", "ckpt-8.index"]
    assert load_yaml(last / "config.yaml").actor_lr == 1e-3
    a_weights = actor_arrays(trial._kept_learner[1])
    # trial C, the same but for its rate, trains other weights; its learner is kept
    trial.run_trial({"actor_lr": 3e-2, "entropy_coef": 0.0}, spec, FakeTuneSession(tmp_path / "c"))
    c_learner = trial._kept_learner[1]
    c_weights = actor_arrays(c_learner)
    assert not all(np.array_equal(x, y) for x, y in zip(a_weights, c_weights))
    # B exploits A (its checkpoint, a perturbed config) on C's process, with no budget left
    b = FakeTuneSession(tmp_path / "b", start_from=last)
    trial.run_trial({"actor_lr": 1e-2, "entropy_coef": 0.5}, spec, b)
    assert trial._kept_learner[1] is c_learner  # not rebuilt
    for x, y in zip(actor_arrays(c_learner), a_weights):
        np.testing.assert_array_equal(x, y)
    assert c_learner.optimizers.initial_rates["actor"].numpy() == pytest.approx(1e-2)
    assert c_learner.objective.entropy_coef.numpy() == pytest.approx(0.5)
    assert load_yaml(tmp_path / "b" / "run" / "config.yaml").actor_lr == 1e-2
