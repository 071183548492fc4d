"""benchmarks/run_suite.py end to end: a tiny suite entry trains through the real
`dac train` (serial, a few hundred env steps), appends one JSON line with the fields the
suite's results promise, and a second call skips the run already recorded."""

import json
from pathlib import Path

import pytest
from paths import load_benchmark

pytestmark = pytest.mark.e2e
run_suite = load_benchmark("run_suite")

SUITE = """
suite: tiny
tables: []
defaults: {workers: [1], seeds: [0]}
entries:
  - name: cartpole-tiny
    env: CartPole-v1
    package: gymnasium
    budget: 256
    flags: {serial: true, envs_per_worker: 2, rollout_length: 8, hidden_sizes: [8]}
    reference: {value: 475, source: "solved"}
"""
FIELDS = {"suite", "entry", "env", "workers", "seed", "flags", "budget", "env_steps",
          "updates", "mean_return_100", "wall_s", "commit", "env_package", "versions",
          "command", "reference", "time"}


def test_a_suite_entry_appends_one_line_with_score_steps_versions_and_command(tmp_path, capsys):
    suite, out = tmp_path / "tiny.yaml", tmp_path / "tiny.jsonl"
    suite.write_text(SUITE)
    out.write_text('{"entry": "earlier", "workers": 1, "seed": 0, "budget": 1}\n')
    argv = [str(suite), "--seeds", "2", "--out", str(out)]
    assert run_suite.main([*argv, "--dry-run"]) == 0
    command = capsys.readouterr().out.strip()
    assert run_suite.main(argv) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["entry"] == "earlier"  # appended, not rewritten
    rec = lines[1]
    assert FIELDS <= set(rec), FIELDS - set(rec)
    assert (rec["suite"], rec["entry"], rec["workers"], rec["seed"]) == ("tiny", "cartpole-tiny", 1, 2)
    assert rec["budget"] == 256 and 256 <= rec["env_steps"] < 256 + 16
    assert isinstance(rec["mean_return_100"], float) and rec["mean_return_100"] > 0
    assert rec["wall_s"] > 0 and rec["updates"] >= 1
    assert set(rec["versions"]) == {"distributed_ac", "tensorflow", "gymnasium", "ray"}
    assert all(v and v != "not installed" for v in rec["versions"].values())
    assert rec["command"] == command  # what --dry-run printed is what ran
    assert rec["flags"] == ["--serial", "--envs-per-worker", "2", "--rollout-length", "8",
                            "--hidden-sizes", "8"]
    assert rec["reference"] == {"value": 475, "source": "solved"}
    capsys.readouterr()
    assert run_suite.main(argv) == 0  # the run is in the file: skipped, nothing appended
    assert len(out.read_text().splitlines()) == 2
    assert "skip cartpole-tiny W=1 seed=2" in capsys.readouterr().err


def test_a_failing_run_is_one_line_and_exit_1(tmp_path, capsys):
    suite = tmp_path / "bad.yaml"
    suite.write_text(SUITE.replace("rollout_length: 8", "rollout_length: 0"))
    assert run_suite.main([str(suite), "--out", str(tmp_path / "bad.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cartpole-tiny W=1 seed=0: dac train exited" in err
    assert not Path(tmp_path / "bad.jsonl").exists()
