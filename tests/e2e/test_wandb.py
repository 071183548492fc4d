"""dac train --wandb with the real wandb package, offline: the W&B run holds the config,
the very rows TensorBoard gets (same names, same env steps, evaluations included) and the
summary; a resume continues the same W&B run; without the flag wandb is never imported,
and without the package the flag is one line and exit 2."""

import contextlib
import io
import json
import shutil
import struct
import sys
from pathlib import Path

import pytest

wandb = pytest.importorskip("wandb")

from helpers import cli_run, cli_train, python, tensorboard_scalars  # noqa: E402

from distributed_ac.config.schema import to_dict  # noqa: E402
from distributed_ac.run.metrics import read_rows  # noqa: E402
from distributed_ac.run.rundir import open_run, saved_config  # noqa: E402

FLAGS = ["--no-preset", "--serial", "--num-workers", "1", "--mode", "sync",
         "--envs-per-worker", "2", "--rollout-length", "8", "--hidden-sizes", "16",
         "--log-every-s", "0.001", "--checkpoint-every", "4"]
TRACKED = ["--wandb", "--wandb-mode", "offline", "--wandb-project", "dac-tests",
           "--wandb-group", "cartpole", "--wandb-tags", "short", "serial"]
W_B = ("_step", "_runtime", "_timestamp", "env_steps")  # in every W&B row besides ours


@pytest.fixture(scope="module")
def wandb_env():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_SILENT", "true")
        mp.delenv("WANDB_MODE", raising=False)  # the flag's mode is what is tested
        yield mp


@pytest.fixture(scope="module")
def tracked(tmp_path_factory, wandb_env):
    """A 12-update serial CartPole run evaluating every 3 updates, logged to W&B offline
    under its own WANDB_DIR: (run directory, WANDB_DIR, summary)."""
    root = tmp_path_factory.mktemp("wandb")
    wandb_env.setenv("WANDB_DIR", str(root / "wandb_dir"))
    (root / "wandb_dir").mkdir()
    summary = train_cli(*FLAGS, *TRACKED, "--total-env-steps", str(12 * 16),
                        "--eval-every", "3", "--eval-episodes", "1",
                        "--run-dir", str(root / "run"))
    return root / "run", root / "wandb_dir", summary


def train_cli(*argv) -> dict:
    """`dac train ARGV` in this process (capsys is a test's, not a module fixture's): its
    summary, stdout's last line."""
    from distributed_ac.commands.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["train", *argv])
    assert code == 0
    return json.loads(out.getvalue().strip().splitlines()[-1])


def records(path: Path):
    """The protobuf Records of an offline W&B run's run-<id>.wandb file: wandb's LevelDB-
    style log (a 7-byte header, then 32 KiB blocks of records, each a 7-byte header of
    crc, length and type, split FIRST/MIDDLE/LAST across blocks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, head = path.read_bytes(), 32768, 7
    ident, magic, _ = struct.unpack("<4sHB", data[:head])
    assert ident == b":W&B" and magic == 0xBEE1, "not a W&B transaction log"
    pos, parts = head, b""
    while pos + head <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos:pos + head])
        if left < head or (kind == 0 and length == 0):  # the block's zero padding
            pos += left
            continue
        chunk, pos = data[pos + head:pos + head + length], pos + head + length
        parts = chunk if kind in (1, 2) else parts + chunk  # FULL, FIRST | MIDDLE, LAST
        if kind in (1, 4):
            yield pb.Record.FromString(parts)


def offline_runs(wandb_dir: Path) -> list[dict]:
    """Each offline run under wandb_dir, oldest first: its run record, history rows,
    final summary and exit code."""
    found = []
    for run_dir in sorted((wandb_dir / "wandb").glob("offline-run-*")):
        run, rows, summary, exit_code = None, [], {}, None
        for r in records(next(run_dir.glob("run-*.wandb"))):
            kind = r.WhichOneof("record_type")
            if kind == "run":
                run = r.run
            elif kind == "history":
                rows.append({"/".join(i.nested_key) or i.key: json.loads(i.value_json)
                             for i in r.history.item})
            elif kind == "summary":
                summary.update({i.key: json.loads(i.value_json) for i in r.summary.update if i.key})
            elif kind == "exit":
                exit_code = r.exit.exit_code
        found.append({"run": run, "rows": rows, "summary": summary, "exit_code": exit_code})
    return found


def test_the_wandb_run_gets_the_rows_tensorboard_gets_at_the_same_env_steps(tracked):
    run_dir, wandb_dir, _ = tracked
    (logged,) = offline_runs(wandb_dir)
    ours = [{k: v for k, v in row.items() if k not in W_B} for row in logged["rows"]]
    steps = [row["env_steps"] for row in logged["rows"]]
    jsonl = read_rows(run_dir / "metrics.jsonl")
    assert steps == [r["env_steps"] for r in jsonl]  # row for row, evaluations' in place
    assert any("eval/mean_return" in row for row in ours), "no evaluation row reached W&B"
    tb = tensorboard_scalars(run_dir)
    in_wandb = {(k, step): v for row, step in zip(ours, steps) for k, v in row.items()}
    assert in_wandb.keys() == tb.keys()
    for key, value in tb.items():
        assert in_wandb[key] == pytest.approx(value, rel=1e-6), key


def test_the_wandb_run_holds_the_config_summary_group_and_tags_and_ended_cleanly(tracked):
    run_dir, wandb_dir, summary = tracked
    (logged,) = offline_runs(wandb_dir)
    run = logged["run"]
    config = {i.key: json.loads(i.value_json) for i in run.config.update if i.key != "_wandb"}
    assert config == to_dict(saved_config(open_run(run_dir)))
    assert (run.project, run.run_group, list(run.tags)) == ("dac-tests", "cartpole",
                                                           ["short", "serial"])
    assert run.run_id == (run_dir / "wandb_id").read_text().strip()
    assert run.display_name == run_dir.name
    for key, value in json.loads(json.dumps(summary)).items():
        assert logged["summary"][key] == value, key
    assert logged["exit_code"] == 0


def test_a_resume_continues_the_same_wandb_run(tracked, tmp_path, capsys):
    run_dir, wandb_dir, _ = tracked
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)  # the other tests read the original
    before = len(offline_runs(wandb_dir))
    summary, _ = cli_train(capsys, "--resume", str(copy), "--total-env-steps", str(16 * 16))
    runs = offline_runs(wandb_dir)
    assert len(runs) == before + 1
    resumed = runs[-1]
    assert resumed["run"].run_id == runs[0]["run"].run_id
    assert resumed["rows"][0]["env_steps"] > 12 * 16  # the new stretch only
    assert resumed["summary"]["env_steps"] == summary["env_steps"] == 16 * 16


def test_without_the_flag_wandb_is_never_imported(tmp_path):
    code = ("import sys; from distributed_ac.commands.main import main; "
            f"code = main(['train', *{FLAGS!r}, '--total-env-steps', '32', "
            f"'--run-dir', {str(tmp_path / 'run')!r}]); "
            "print('wandb' in sys.modules, code)")
    done = python("-c", code, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["False", "0"]


def test_the_flag_without_the_package_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    code, _, err = cli_run(capsys, "train", *FLAGS, "--wandb", "--total-env-steps", "32",
                           "--run-dir", str(tmp_path / "run"))
    assert code == 2
    assert err == ("dac: error: --wandb needs the wandb package: "
                   "pip install 'distributed_ac[wandb]'\n")
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_wandb_that_cannot_start_is_one_line_and_leaves_no_run_directory(
        tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)  # and no ~/.netrc to find one in
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    code, _, err = cli_run(capsys, "train", *FLAGS, "--wandb", "--wandb-mode", "online",
                           "--total-env-steps", "32", "--run-dir", str(tmp_path / "run"))
    assert code == 2
    assert err.startswith("dac: error: --wandb: W&B could not start a run: ") and \
        err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()
