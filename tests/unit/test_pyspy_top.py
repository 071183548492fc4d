"""benchmarks/pyspy_top.py: the py-spy summary the notes quote (docs/notes/profiles.md)."""

import json

import pytest
from paths import load_benchmark

pyspy_top = load_benchmark("pyspy_top")

# py-spy `record -f raw --subprocesses`: one collapsed stack per line, then its count.
RAW = """\
process 10:"python train.py";main (train.py:3);loop (/x/train.py:40);step (/x/learner.py:9) 30
process 10:"python train.py";main (train.py:3);loop (/x/train.py:41);wait (/x/distributed.py:5) 20
process 10:"python train.py";main (train.py:3);setup (/x/train.py:9) 50
process 11:"ray::Worker";main_loop (/r/worker.py:1);collect (/x/rollout.py:7);collect (/x/rollout.py:8) 40
"""


def test_inclusive_seconds_and_filters():
    out = pyspy_top.summarise(RAW.splitlines(), rate=10, within=None, process=None, top=10)
    assert out["seconds"] == 14.0
    top = {name: s for s, name in out["top"]}
    assert top["main (train.py)"] == 10.0
    assert top["loop (train.py)"] == 5.0  # two lines of one function add up
    assert top["collect (rollout.py)"] == 4.0  # a recursive frame counts once per sample

    loop = pyspy_top.summarise(RAW.splitlines(), 10, within="loop", process=None, top=10)
    assert loop["seconds"] == 5.0
    assert {n for _, n in loop["top"]} == {"main (train.py)", "loop (train.py)",
                                           "step (learner.py)", "wait (distributed.py)"}

    worker = pyspy_top.summarise(RAW.splitlines(), 10, within=None, process="ray::", top=10)
    assert worker["seconds"] == 4.0 and list(worker["processes"]) == ["ray::Worker"]


def test_cli_prints_json_and_rejects_a_missing_file(tmp_path, capsys):
    prof = tmp_path / "p.txt"
    prof.write_text(RAW)
    assert pyspy_top.main([str(prof), "--rate", "100", "--top", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seconds"] == pytest.approx(1.4) and len(out["top"]) == 2
    assert pyspy_top.main([str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read" in err[0]
