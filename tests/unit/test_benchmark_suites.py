"""benchmarks/suites/*.yaml and benchmarks/run_suite.py without training: every suite
parses, sets only real Config fields, names a real env, and is the source of the docs
tables it claims; the runner's plan, its commands (--dry-run) and its bad-input lines."""

import dataclasses
import importlib
import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import yaml
from paths import ROOT as _ROOT
from paths import load_benchmark

from distributed_ac.config.schema import Config

ROOT = Path(_ROOT)
run_suite = load_benchmark("run_suite")
FIELDS = {f.name for f in dataclasses.fields(Config)}
SUITES = run_suite.suite_names()
ENTRIES = [(s, e) for s in SUITES for e in run_suite.load_suite(s)["entries"]]


def _hook(name: str):
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    spec = importlib.util.spec_from_file_location(f"_suites_{name}", ROOT / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_is_a_suite_for_each_family_the_docs_measure():
    assert {"classic", "mujoco", "toy_text", "minigrid", "minatar", "dm_control", "popgym",
            "atari", "multiagent", "spaces", "defaults"} <= set(SUITES)


@pytest.mark.parametrize("suite", SUITES)
def test_a_suite_is_named_as_its_file_and_its_entries_have_budgets_and_references(suite):
    loaded = run_suite.load_suite(suite)
    assert loaded["suite"] == suite
    for e in loaded["entries"]:
        assert isinstance(e["budget"], int) and e["budget"] > 0, e["name"]
        ref = e["reference"]
        assert set(ref) == {"value", "source"} and ref["source"], e["name"]
        assert ref["value"] is None or isinstance(ref["value"], (int, float)), e["name"]


@pytest.mark.parametrize("suite,entry", ENTRIES, ids=[f"{s}-{e['name']}" for s, e in ENTRIES])
def test_every_flag_and_config_file_sets_a_real_config_field(suite, entry):
    assert set(entry.get("flags", {})) <= FIELDS, set(entry.get("flags", {})) - FIELDS
    if "config" in entry:
        fields = yaml.safe_load((ROOT / entry["config"]).read_text()) or {}
        assert set(fields) <= FIELDS, set(fields) - FIELDS


@pytest.mark.parametrize("suite,entry", ENTRIES, ids=[f"{s}-{e['name']}" for s, e in ENTRIES])
def test_every_entry_names_a_real_env(suite, entry):
    env = entry["env"]
    if ":" in env:  # module:attr, as `dac train --env` takes an entry point
        module, attr = env.split(":")
        assert callable(getattr(importlib.import_module(module), attr))
        return
    packages = list(entry.get("flags", {}).get("gym_packages", []))
    packages += ["ale_py"] if env.startswith("ALE/") else []
    for name in packages:
        module, _, function = name.partition(":")
        try:
            imported = importlib.import_module(module)
        except ImportError:
            pytest.skip(f"{module} is not installed here")
        if function:
            getattr(imported, function)()
        elif module == "ale_py":
            gym.register_envs(imported)
    assert env in gym.registry, f"{env} is not a registered id"


def test_every_results_table_has_a_caption_naming_its_suites_and_every_claimed_table_exists():
    generate = _hook("generate")
    claimed = generate.table_suites()
    assert set(claimed) <= set(generate.RESULTS_TABLES)
    for table in generate.RESULTS_TABLES:
        generate.caption(table)  # raises for a table no suite claims
    assert "classic (`benchmarks/suites/classic.yaml`)" in generate.caption("workers")
    assert "run_suite.py spaces" in generate.caption("spaces")
    page = generate.expand("<!-- dac:results defaults-sweep -->\n")
    assert page.startswith("*Suite: defaults (`benchmarks/suites/defaults.yaml`)")
    assert "\n\n| " in page  # the caption, a blank line, then the table unchanged
    assert page.endswith(generate.RESULTS_TABLES["defaults-sweep"]())


def test_dry_run_prints_each_command_and_runs_nothing(capsys, monkeypatch):
    monkeypatch.setattr(run_suite, "run_one", lambda *a: pytest.fail("a dry run ran"))
    assert run_suite.main(["mujoco", "--only", "hopper", "--seeds", "3", "--workers", "1", "8",
                           "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"dac train --env Hopper-v5 --num-workers {w} --seed 3 --total-env-steps 1000000 --serial"
        for w in (1, 8)]


def test_dry_run_spells_lists_configs_and_no_preset_as_dac_train_takes_them(capsys):
    assert run_suite.main(["minatar", "--dry-run", "--budget", "5000"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"dac train --env MinAtar/Asterix-v1 --num-workers {w} --seed 0 --total-env-steps 5000"
        " --gym-packages minatar.gym:register_envs" for w in (1, 4)]
    assert run_suite.main(["defaults", "--only", "ppo-norm-pendulum", "--seeds", "0",
                           "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == (
        "dac train --env Pendulum-v1 --num-workers 1 --seed 0 --total-env-steps 300000"
        " --no-preset --config benchmarks/defaults/ppo-norm.yaml")


def test_flag_args_writes_bools_both_ways_and_lists_as_values():
    assert run_suite.flag_args({"serial": True, "ignore_action_mask": False,
                                "hidden_sizes": [8, 8], "entropy_coef": 0.01}) == [
        "--serial", "--no-ignore-action-mask", "--hidden-sizes", "8", "8", "--entropy-coef", "0.01"]


@pytest.mark.parametrize("argv,said", [
    (["nope"], "no suite 'nope' (benchmarks/suites/ has: atari,"),
    (["classic", "--only", "cartpol"], "suite classic has no entry cartpol (it has: acrobot,"),
    (["classic", "--workers", "0", "--dry-run"], "--workers must be >= 1"),
    (["classic", "--budget", "0", "--dry-run"], "--budget must be >= 1"),
    ([], "name a suite"),
    (["missing.yaml"], "no suite file missing.yaml"),
])
def test_bad_input_is_one_line_and_exit_2(argv, said, capsys):
    assert run_suite.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("run_suite: " + said), err


@pytest.mark.parametrize("text,said", [
    ("entries: [{name: a, env: CartPole-v1, budget: 10}]", "entry 'a': missing reference"),
    ("entries: [{name: a, env: CartPole-v1, budget: 10, reference: {value: 1, source: x},"
     " flag: {}}]", "entry 'a': unknown key flag"),
    ("entries: [{name: a, env: E, budget: 1, reference: 1}, {name: a, env: E, budget: 1,"
     " reference: 1}]", "two entries named 'a'"),
    ("entries: {a: 1}", "a suite is a mapping with a list of entries"),
    ("entries: [", "not YAML"),
])
def test_a_bad_suite_file_is_one_line_and_exit_2(tmp_path, capsys, text, said):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert run_suite.main([str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def test_the_benchmarks_readme_lists_every_suite():
    readme = ROOT / "benchmarks" / "README.md"
    text = readme.read_text() if readme.exists() else ""
    missing = [s for s in SUITES if f"suites/{s}.yaml" not in text]
    assert not missing, missing
