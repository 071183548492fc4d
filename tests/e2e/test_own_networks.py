"""A user's own encoder end to end (docs/guide/own-networks.md): tests/own_torso.py's
gated encoder, named `--torso own_torso:gated`, learns CartPole within a step budget
(fixed seed, a floor on the 100-episode mean), reaches Ray workers by their own import,
and exports; a twin that disagrees with its Keras layer is refused in one line."""

import json
import re

import pytest
from failed_runs import crash_report
from helpers import cli_run, dac_with_tests, export_acts_as_numpy_policy
from paths import FAST_CONFIG

pytestmark = pytest.mark.e2e

BUDGET = 160_000
TORSO = "own_torso:gated"


def summary_of(out) -> dict:
    assert out.returncode == 0, crash_report(out)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """benchmarks/cartpole_fast.yaml with the gated encoder, serial (one process; the
    updates one async Ray worker makes, so the count does not depend on the machine):
    seed 0 read a mean of 471 at 160,256 steps (~11 s of training); seeds 1 and 2 476
    and 450. A random policy's mean is ~22."""
    run_dir = tmp_path_factory.mktemp("own") / "run"
    out = dac_with_tests("train", "--run-dir", str(run_dir), "--config", FAST_CONFIG,
                         "--torso", TORSO, "--serial", "--seed", "0",
                         "--total-env-steps", str(BUDGET), timeout=600)
    return run_dir, summary_of(out)


def test_a_users_encoder_learns_cartpole_within_160k_env_steps(trained):
    _, summary = trained
    assert summary["torso"] == TORSO, summary
    assert summary["mean_return_100"] >= 400, summary
    assert summary["env_steps"] <= BUDGET + 32 * 16, summary


def test_the_export_of_a_users_encoder_acts_as_the_workers_numpy_policy(trained, tmp_path,
                                                                         capsys):
    """`dac export` runs the TF module's forward_of over copies of the arrays; its greedy
    actions are the NumPy policy's, built from the twin."""
    run_dir, _ = trained
    code, _, err = cli_run(capsys, "export", str(run_dir), "--out", str(tmp_path / "policy"))
    assert code == 0, err[-2000:]
    export_acts_as_numpy_policy(run_dir, tmp_path / "policy", TORSO)


def test_a_ray_worker_imports_the_users_encoder_itself(tmp_path):
    """A local Ray worker is a process of its own: it gets the encoder by importing
    own_torso (whose pid log names it), not from the driver's registration."""
    log = tmp_path / "imports.log"
    out = dac_with_tests("train", "--run-dir", str(tmp_path / "run"), "--torso", TORSO,
                         "--num-workers", "1", "--num-envs", "8", "--rollout-length", "16",
                         "--total-env-steps", "2048", env={"DAC_TEST_PKG_LOG": str(log)})
    summary = summary_of(out)
    assert summary["torso"] == TORSO and summary["workers"] == 1, summary
    assert summary["env_steps"] >= 2048 and summary["updates"] >= 1, summary
    worker_pid = int(re.search(r"worker 0: pid (\d+)", out.stderr).group(1))
    importers = {int(line.split()[0]) for line in log.read_text().splitlines()}
    assert worker_pid in importers, (worker_pid, importers)


def test_a_twin_that_disagrees_with_its_keras_layer_is_refused_in_one_line(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code, _, err = cli_run(capsys, "train", "--torso", "own_torso:gated_wrong", "--serial",
                           "--total-env-steps", "1024", "--run-dir", str(run_dir))
    assert code == 2, err[-2000:]
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("dac: error: torso own_torso:gated_wrong: its NumPy twin WrongTwin "
                           "disagrees with its Keras layer on random observations: max "
                           "difference "), last
    assert float(re.search(r"max difference ([0-9.e+-]+)", last).group(1)) > 1e-4, last
    assert not run_dir.exists()  # refused before the run directory is written
