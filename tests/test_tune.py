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
