"""Envs whose ids a package registers on import (`--gym-packages`, Config.gym_packages).

The test packages tests/registers_on_import.py (registers DacTestPkg-v0 when imported, as
minigrid, shimmy and popgym do) and tests/registers_by_function.py (registers DacTestFn-v0
when its register_envs() is called, as MinAtar's minatar.gym does) append the pid of each
process that imports them to $DAC_TEST_PKG_LOG, so a test counts the processes that did.
`dac` runs in subprocesses whose PYTHONPATH holds tests/ (helpers.dac_with_tests); a local Ray's
workers are started by its raylet, which inherits the driver's environment.
"""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import yaml
from helpers import dac_with_tests, environ_with_tests, python, write_yaml

from distributed_ac.config.schema import Config, from_dict, load_yaml
from distributed_ac.core.errors import EnvError
from distributed_ac.envs import packages
from distributed_ac.envs.vector import resolve_env_id

PKG, PKG_ID = "registers_on_import", "DacTestPkg-v0"
FN, FN_ID = "registers_by_function:register_envs", "DacTestFn-v0"
SHORT = ("--total-env-steps", "1024", "--num-envs", "8", "--rollout-length", "16")


@pytest.fixture
def pid_log(tmp_path, monkeypatch) -> Path:
    """The file the test packages log importing pids to, in this test's subprocesses."""
    log = tmp_path / "imports.log"
    monkeypatch.setenv("DAC_TEST_PKG_LOG", str(log))
    return log


def importers(log: Path, env_id: str = PKG_ID) -> set[int]:
    """The pids of the processes that registered env_id."""
    lines = log.read_text().split("\n") if log.exists() else []
    return {int(line.split()[0]) for line in lines if line.endswith(" " + env_id)}


def one_error_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("dac: error: "), last
    return last


def summary(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- one line and exit 2, through the real CLI ------------------------------------------

BAD = {
    "an id a package registers, without the flag": (
        ["--env", PKG_ID], f"unknown environment id '{PKG_ID}': not in the Gymnasium registry "
        "(check the spelling, or give a module:Class entry point; if a package registers it, "
        "name it with --gym-packages PKG)"),
    "a package that is not installed": (
        ["--env", PKG_ID, "--gym-packages", "minigridd"],
        "cannot import gym package 'minigridd': ModuleNotFoundError: No module named "
        "'minigridd' (pip install it"),
    "a package whose function registers the id, imported but not called": (
        ["--env", FN_ID, "--gym-packages", "registers_by_function"],
        f"unknown environment id '{FN_ID}'"),
    "a function the package lacks": (
        ["--env", FN_ID, "--gym-packages", "registers_by_function:no_such_fn"],
        "gym package 'registers_by_function:no_such_fn': module 'registers_by_function' has "
        "no callable 'no_such_fn'"),
    "a MinAtar id without minatar": (
        ["--env", "MinAtar/Asterix-v1"],
        "MinAtar's ids are registered by --gym-packages minatar.gym:register_envs)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_missing_or_unimportable_package_is_one_line_exit_2_and_no_run_dir(case, tmp_path):
    argv, needle = BAD[case]
    out = dac_with_tests("train", *argv, "--serial", *SHORT, "--run-dir", str(tmp_path / "run"))
    assert needle in one_error_line(out), case
    assert not (tmp_path / "run").exists()


def test_a_yaml_config_names_packages_as_the_flag_does(tmp_path):
    out = dac_with_tests("train", "--config", write_yaml(tmp_path, "env: DacTestPkg-v0\n"
                                                        "gym_packages: [minigridd]\n"),
              "--run-dir", str(tmp_path / "run"))
    assert "cannot import gym package 'minigridd'" in one_error_line(out)


def test_a_yaml_config_may_name_one_package_without_a_list():
    assert from_dict({"gym_packages": "minigrid"}).gym_packages == ("minigrid",)
    assert from_dict({"gym_packages": ["a", "b:f"]}).gym_packages == ("a", "b:f")


# ---- runs that import the package where the env is made ---------------------------------

@pytest.fixture(scope="module")
def serial_run(tmp_path_factory) -> Path:
    """A short serial run of DacTestPkg-v0 whose package is named in a YAML config."""
    tmp = tmp_path_factory.mktemp("serial")
    config = write_yaml(tmp, f"env: {PKG_ID}\ngym_packages: [{PKG}]\n")
    out = dac_with_tests("train", "--config", config, "--serial", *SHORT,
                         "--run-dir", str(tmp / "run"))
    assert summary(out)["env_steps"] == 1024
    return tmp / "run"


def test_a_serial_run_trains_on_the_id_and_its_config_yaml_keeps_the_package(serial_run):
    saved = yaml.safe_load((serial_run / "config.yaml").read_text())
    assert saved["env"] == PKG_ID and saved["gym_packages"] == [PKG]
    assert load_yaml(serial_run / "config.yaml").gym_packages == (PKG,)


def test_dac_evaluate_and_resume_import_the_package_from_the_runs_config(serial_run, pid_log):
    evaluated = summary(dac_with_tests("evaluate", str(serial_run), "--episodes", "2"))
    assert evaluated["env"] == PKG_ID and len(evaluated["returns"]) == 2
    resumed = summary(dac_with_tests("train", "--resume", str(serial_run),
                                     "--total-env-steps", "2048"))
    assert resumed["env_steps"] == 2048
    assert len(importers(pid_log)) == 2  # each command's own process imported it


def test_a_module_function_entry_calls_the_function_before_the_env_is_made(tmp_path, pid_log):
    out = dac_with_tests("train", "--env", FN_ID, "--gym-packages", FN, "--serial", *SHORT,
                         "--run-dir", str(tmp_path / "run"))
    assert summary(out)["env"] == FN_ID
    assert len(importers(pid_log, FN_ID)) == 1  # called once, for the probe and the workers


@pytest.mark.e2e
def test_on_local_ray_every_worker_and_the_evaluator_import_the_package(tmp_path, pid_log):
    """Rollout workers and the evaluation actor are processes of their own: the run
    works only if each imports the package itself (none is forked from the driver)."""
    out = dac_with_tests("train", "--env", PKG_ID, "--gym-packages", PKG, "--num-workers", "2",
                         "--eval-every", "2", "--eval-episodes", "1", *SHORT,
                         "--run-dir", str(tmp_path / "run"))
    result = summary(out)
    assert result["workers"] == 2 and result["evaluations"] >= 1
    assert len(importers(pid_log)) >= 4  # the driver's probe, 2 workers, the evaluator


@pytest.mark.e2e
def test_a_package_missing_on_the_workers_node_is_one_line_not_worker_restarts(tmp_path):
    """The driver's probe imports it; each Ray worker fails to: the run stops at the
    first worker's start-up with that worker's line and exit 2, instead of replacing
    workers that can never start (max_worker_restarts of them)."""
    out = dac_with_tests("train", "--env", "DacTestNode-v0", "--gym-packages",
                         "driver_only_package", "--num-workers", "1", *SHORT,
                         "--run-dir", str(tmp_path / "run"))
    line = one_error_line(out)
    assert "cannot import gym package 'driver_only_package'" in line, line
    assert "not on this node" in line and "replac" not in out.stderr, out.stderr[-2000:]


TRIAL = """
import sys
from pathlib import Path
from fakes import FakeTuneSession
from distributed_ac.tuning.experiment_spec import load_spec
from distributed_ac.tuning.trial import run_trial

exp = Path(sys.argv[1])
run_trial({"actor_lr": 1e-3}, load_spec(exp), FakeTuneSession(exp / "trial"))
"""


def test_a_tune_trial_imports_the_base_configs_packages_in_its_own_process(tmp_path, pid_log):
    """`dac tune`'s spec, as tune.yaml holds it, trains in a fresh process (the trial's)
    as Tune's trainable would, with a stand-in for Tune's session."""
    from distributed_ac.commands.tune import make_spec, parse_tune_args

    space = write_yaml(tmp_path, "actor_lr: {choice: [0.001]}\n")
    args = parse_tune_args(["--env", PKG_ID, "--gym-packages", PKG, "--no-preset",
                            "--space", space, "--report-every", "4", *SHORT])
    make_spec(args).save(tmp_path / "exp")
    assert yaml.safe_load((tmp_path / "exp" / "tune.yaml").read_text())["base"][
        "gym_packages"] == [PKG]
    out = python("-c", TRIAL, str(tmp_path / "exp"), env=environ_with_tests(), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    trained = load_yaml(tmp_path / "exp" / "trial" / "run" / "config.yaml")
    assert trained.env == PKG_ID and trained.gym_packages == (PKG,)
    assert len(importers(pid_log)) == 1


ASYNC = f"""
from distributed_ac.config.schema import Config
from distributed_ac.envs.vector import vector_env_for
venv = vector_env_for(Config(env="{PKG_ID}", gym_packages=("{PKG}",), vectorization="async"), 2)
venv.reset(seed=0)
venv.step(venv.action_space.sample())
venv.close()
"""


def test_async_sub_envs_in_spawned_processes_make_the_id_the_driver_registered(pid_log):
    out = python("-c", ASYNC, env=environ_with_tests(), timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]


# ---- the module itself, in this process ---------------------------------------------------

@pytest.fixture
def fresh(monkeypatch):
    """This process as if nothing had been imported through gym_packages yet."""
    monkeypatch.setattr(packages, "_imported", set())


def test_each_name_is_imported_and_its_function_called_once_per_process(fresh, pid_log):
    packages.import_packages([FN])
    packages.import_packages((FN,))
    assert FN_ID in gym.registry
    assert pid_log.read_text().count(FN_ID) == 1


def test_a_lone_string_is_one_name_not_a_list_of_letters(fresh):
    packages.import_packages(PKG)
    assert packages._imported == {PKG} and PKG_ID in gym.registry


def test_a_known_suite_that_is_not_installed_names_the_projects_extra(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "popgym", None)  # what importing it finds: no module
    with pytest.raises(EnvError, match=r"cannot import gym package 'popgym': "
                                       r"ModuleNotFoundError: .*pip install -e \"\.\[popgym\]\""):
        packages.import_packages(["popgym"])


@pytest.mark.parametrize("env_id, needle", [
    ("MiniGrid-NoSuch-v0", "MiniGrid's ids are registered by --gym-packages minigrid"),
    ("BabyAI-NoSuch-v0", "MiniGrid's ids are registered by --gym-packages minigrid"),
    ("MinAtar/NoSuch-v1", "MinAtar's ids are registered by --gym-packages "
                          "minatar.gym:register_envs"),
    ("dm_control/no-such-v0", "dm_control's ids are registered by --gym-packages shimmy"),
    ("popgym-NoSuch-v0", "popgym's ids are registered by --gym-packages popgym"),
    ("NoSuchSuite-v0", "if a package registers it, name it with --gym-packages PKG"),
])
def test_an_unknown_id_names_the_package_its_suite_needs(fresh, env_id, needle):
    with pytest.raises(EnvError, match="unknown environment id") as e:
        resolve_env_id(env_id)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_an_unknown_id_of_a_suite_already_imported_is_a_spelling_mistake(fresh):
    packages._imported.add("minigrid")
    with pytest.raises(EnvError, match="--gym-packages minigrid registers no such MiniGrid id"):
        resolve_env_id("MiniGrid-NoSuch-v0")


@pytest.mark.parametrize("package, env_id", [
    ("minigrid", "MiniGrid-Empty-5x5-v0"),
    ("minatar.gym:register_envs", "MinAtar/Asterix-v1"),
    ("shimmy", "dm_control/cartpole-swingup-v0"),
    ("popgym", "popgym-RepeatPreviousEasy-v0"),
])
def test_the_four_suites_register_the_ids_the_readme_trains_on(fresh, package, env_id):
    pytest.importorskip(package.partition(":")[0].split(".")[0])
    packages.import_packages(Config(env=env_id, gym_packages=(package,)).gym_packages)
    assert resolve_env_id(env_id) == env_id
