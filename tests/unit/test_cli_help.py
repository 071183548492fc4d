"""--help names each of a subcommand's own switches once: a switch that is off unless
given (--no-preset, --overwrite, --best, ...) has no negated twin."""

import subprocess
import sys

import pytest

SWITCHES = {"train": ["--no-preset", "--overwrite", "--dashboard"],
            "tune": ["--no-preset"],
            "bench": ["--gpu-sweep"],
            "evaluate": ["--deterministic", "--best"],
            "export": ["--best"]}


@pytest.mark.parametrize("command", sorted(SWITCHES))
def test_a_switch_has_no_negated_twin(command):
    out = subprocess.run([sys.executable, "-m", "distributed_ac", command, "--help"],
                         capture_output=True, text=True, env={"COLUMNS": "200", "PATH": ""})
    assert out.returncode == 0, out.stderr
    for switch in SWITCHES[command]:
        assert switch in out.stdout, switch
        twin = "--no-" + switch[2:]
        assert twin not in out.stdout, twin
    # a Config field that a preset may turn on keeps its pair (--no-normalize-reward)
    if command in ("train", "tune", "bench"):
        assert "--no-normalize-reward" in out.stdout
