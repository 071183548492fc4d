"""The run directory (rundir.py): its documented entries and no pickle, safe config
loading, refusing to replace a run without --overwrite, fresh default paths, no
directory left by a run that fails to start, and a resume that records its config only
once a checkpoint can be read."""

import dataclasses
import io
import pickletools

import pytest
from helpers import train_quietly

from distributed_ac.config.schema import Config
from distributed_ac.core.errors import CheckpointError, RunDirError
from distributed_ac.envs.vector import resolved
from distributed_ac.run import rundir

SMALL = dict(envs_per_worker=4, rollout_length=8, hidden_sizes=(16,), total_env_steps=10_000)


def _is_pickle(blob: bytes) -> bool:
    if not blob.startswith(b"\x80") or len(blob) < 2 or not 2 <= blob[1] <= 5:
        return False
    try:
        pickletools.dis(io.BytesIO(blob), out=io.StringIO())
        return True
    except Exception:
        return False


def test_a_run_directory_holds_no_pickle_and_only_the_documented_entries(tmp_path):
    cfg = Config(serial=True, num_workers=1, mode="sync", checkpoint_every=2, log_every_s=0.01,
                 **{**SMALL, "total_env_steps": 4 * 32})
    run_dir = tmp_path / "run"
    train_quietly(cfg, run_dir)
    # startup.log: only where this process loaded TensorFlow during the run and it spoke
    names = sorted(p.name for p in run_dir.iterdir() if p.name != "startup.log")
    assert names == ["checkpoints", "config.yaml", "metrics.jsonl", "plan.yaml", "tb"]
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert files and not [p for p in files if _is_pickle(p.read_bytes())]
    # the config as given, with how the env's observations are read settled in it
    assert rundir.saved_config(rundir.open_run(run_dir)) == resolved(cfg)[0]


def test_config_yaml_is_safe_loaded_so_a_python_tag_runs_no_code(tmp_path):
    marker = tmp_path / "pwned"
    run_dir = tmp_path / "run"
    rundir.new_run(run_dir, Config())
    (run_dir / "config.yaml").write_text(
        f"seed: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(RunDirError, match="not valid YAML"):
        rundir.saved_config(rundir.open_run(run_dir, need_checkpoint=False))
    assert not marker.exists()


def test_a_new_run_refuses_an_existing_run_unless_overwrite_and_keeps_other_files(tmp_path):
    run_dir = tmp_path / "run"
    rundir.new_run(run_dir, Config(seed=1))
    (run_dir / "notes.txt").write_text("mine")
    (run_dir / "wandb_id").write_text("old\n")  # the W&B run a resume of it would continue
    with pytest.raises(RunDirError, match="--resume .* --overwrite"):
        rundir.new_run(run_dir, Config(seed=2))
    run = rundir.new_run(run_dir, Config(seed=2), overwrite=True)
    assert rundir.saved_config(run).seed == 2
    assert (run_dir / "notes.txt").read_text() == "mine"
    assert not (run_dir / "wandb_id").exists()  # the new run is not the old one's W&B run


def test_default_run_directories_never_collide(tmp_path):
    first = rundir.default_path("mypkg.envs:My/Env", root=tmp_path)
    assert first.parent == tmp_path and first.name.startswith("mypkg.envs_My_Env-")
    first.mkdir()
    assert rundir.default_path("mypkg.envs:My/Env", root=tmp_path) != first


def test_a_run_that_fails_to_start_leaves_no_run_directory(tmp_path, capsys):
    from distributed_ac.commands import main as cli

    run_dir = tmp_path / "run"
    assert cli.main(["train", "--env", "NoSuchEnv-v9", "--run-dir", str(run_dir)]) == 2
    assert "unknown environment id" in capsys.readouterr().err
    assert not run_dir.exists()


def test_a_resume_records_its_config_only_once_a_checkpoint_can_be_read(tmp_path):
    cfg = Config(serial=True, num_workers=1, mode="sync", checkpoint_every=1,
                 **{**SMALL, "total_env_steps": 2 * 32})
    run_dir = tmp_path / "run"
    train_quietly(cfg, run_dir)
    longer = dataclasses.replace(cfg, total_env_steps=3 * 32)
    train_quietly(longer, run_dir, resume=True)
    # a resume records its settings
    assert rundir.saved_config(rundir.open_run(run_dir)) == resolved(longer)[0]
    kept = (run_dir / "config.yaml").read_bytes()

    for f in (run_dir / "checkpoints").glob("ckpt-*"):  # every checkpoint torn
        f.write_bytes(f.read_bytes()[:20])
    other = dataclasses.replace(longer, total_env_steps=5 * 32, gamma=0.9)
    with pytest.raises(CheckpointError, match="no readable checkpoint"):
        train_quietly(other, run_dir, resume=True)
    # config.yaml still names the settings the checkpoints were trained with
    assert (run_dir / "config.yaml").read_bytes() == kept


def test_a_live_run_s_directory_is_refused_to_a_second_writer_and_freed_when_it_dies(tmp_path):
    """A resume or an --overwrite of a run still training rewrote its config.yaml and
    deleted its checkpoints under it; the second writer is now refused in one line, and
    the lock dies with the run's process (SIGKILL leaves none behind)."""
    import time

    from helpers import dac, popen_dac

    run_dir = tmp_path / "run"
    live = popen_dac("train", "--serial", "--env", "CartPole-v1", "--run-dir", str(run_dir),
                     "--checkpoint-every", "5", "--total-env-steps", "100000000",
                     "--log-every-s", "0.2")
    try:
        deadline = time.monotonic() + 180
        while not (run_dir / "checkpoints" / "checkpoint").exists():
            assert live.poll() is None and time.monotonic() < deadline, live.stderr.read()[-2000:]
            time.sleep(0.2)
        kept = (run_dir / "config.yaml").read_bytes()
        for argv in (["--resume", str(run_dir), "--actor-lr", "0.01", "--total-env-steps", "2048"],
                     ["--serial", "--run-dir", str(run_dir), "--overwrite",
                      "--total-env-steps", "2048"]):
            out = dac("train", *argv, timeout=120)
            err = out.stderr.strip().splitlines()
            assert out.returncode == 2 and len(err) == 1, (argv, out.returncode, out.stderr[-2000:])
            assert err[0].startswith("dac: error: ") and "in use by another dac train" in err[0]
            assert (run_dir / "config.yaml").read_bytes() == kept
            assert (run_dir / "checkpoints" / "checkpoint").exists()
    finally:
        live.kill()  # SIGKILL: no handler runs, nothing unlocks
        live.communicate()
    out = dac("train", "--resume", str(run_dir), "--total-env-steps", "2048", timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]


def test_a_resume_whose_restore_fails_leaves_the_run_directory_as_it_was(tmp_path, monkeypatch):
    """config.yaml was rewritten before the restore, which then failed: later resumes,
    evaluate and export read settings no checkpoint was trained with. Here the field
    check is switched off (as for a field it did not know) to reach the restore itself."""
    cfg = Config(serial=True, num_workers=1, mode="sync", checkpoint_every=1,
                 **{**SMALL, "total_env_steps": 2 * 32})
    run_dir = tmp_path / "run"
    train_quietly(cfg, run_dir)
    def contents():  # startup.log is a log every session appends to: left out
        return {p: p.read_bytes() for p in run_dir.rglob("*")
                if p.is_file() and p.name != "startup.log"}

    before = contents()
    monkeypatch.setattr(rundir, "STATE_FIELDS", ())
    changed = dataclasses.replace(cfg, total_env_steps=3 * 32, normalize_obs=True)
    with pytest.raises(CheckpointError, match="no readable checkpoint"):
        train_quietly(changed, run_dir, resume=True)
    assert contents() == before
