"""Bad input never gives a traceback and never overwrites good data: each case is one
line on stderr naming what is wrong, and exit code 2. Table-driven, through the CLI."""

import glob
from pathlib import Path

import pytest
from helpers import dac_with_tests, environ_without, free_port, python, write_yaml


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    """A real finished serial run with a checkpoint, to damage and resume in the cases."""
    run = tmp_path_factory.mktemp("good") / "run"
    out = dac_with_tests("train", "--serial", "--total-env-steps", "2048",
                         "--checkpoint-every", "2", "--run-dir", str(run))
    assert out.returncode == 0, out.stderr[-2000:]
    return run


def copy_run(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def damage(run: Path, how: str) -> None:
    ckpts = run / "checkpoints"
    data = sorted(ckpts.glob("*.data-*"))
    if how == "missing":
        for f in ckpts.iterdir():
            f.unlink()
    elif how == "truncated":
        for f in data:
            f.write_bytes(f.read_bytes()[: max(1, f.stat().st_size // 3)])
        for f in ckpts.glob("*.index"):
            f.write_bytes(f.read_bytes()[:20])
    elif how == "corrupted":
        for f in list(data) + list(ckpts.glob("*.index")):
            raw = bytearray(f.read_bytes())
            for i in range(0, len(raw), 7):
                raw[i] ^= 0xFF
            f.write_bytes(bytes(raw))


CASES = {
    "unknown env id": (lambda t, r: ["train", "--env", "NoSuchEnv-v7"], "unknown environment id"),
    "unsupported action space": (lambda t, r: ["train", "--env", "fakes:TupleActionEnv"],
                                 "only Discrete, MultiDiscrete, MultiBinary and 1-D Box"),
    "action_mask with Box actions": (lambda t, r: ["train", "--env", "fakes:MaskedBoxActions"],
                                     "needs Discrete, MultiDiscrete or MultiBinary actions"),
    "action_mask of the wrong length": (lambda t, r: ["train", "--env", "fakes:MaskedWrongLength"],
                                        "an action_mask of 4 entries"),
    # a traceback in serial mode; on Ray 20 restarts, then "worker 0 died while starting"
    "env resetting to the wrong shape, serial": (
        lambda t, r: ["train", "--env", "fakes:WrongShapeReset", "--serial"],
        "does it return observations of its observation_space, Box(-inf, inf, (1,), float64)?"),
    "env resetting to the wrong shape, on Ray": (
        lambda t, r: ["train", "--env", "fakes:WrongShapeReset", "--num-workers", "1"],
        "reset() of env 'fakes:WrongShapeReset' failed in worker 0 (ValueError"),
    "entry point does not import": (lambda t, r: ["train", "--env", "no_such_mod_q:Env"],
                                    "cannot import entry point module"),
    "field out of range": (lambda t, r: ["train", "--gamma", "1.5"], "gamma must be in [0, 1]"),
    "bfloat16 on an MLP": (lambda t, r: ["train", "--cnn-precision", "bfloat16"],
                           "cnn_precision bfloat16 is for CNN torsos"),
    "field of the wrong type": (lambda t, r: ["train", "--envs-per-worker", "many"],
                                "--envs-per-worker"),
    "yaml field of the wrong type": (lambda t, r: ["train", "--config", write_yaml(t, "rollout_length: ten\n")],
                                     "'rollout_length' must be int"),
    "unknown yaml field": (lambda t, r: ["train", "--config", write_yaml(t, "lr: 0.1\n")],
                           "unknown config field(s): lr"),
    "malformed yaml": (lambda t, r: ["train", "--config", write_yaml(t, "env: [CartPole\n")],
                       "not valid YAML"),
    "yaml file not in UTF-8": (lambda t, r: ["train", "--config", latin1_yaml(t)],
                               "is not UTF-8 text (byte 0xe9 at offset 5)"),
    "run config not in UTF-8": (lambda t, r: (latin1_yaml(r, "config.yaml"),
                                              ["train", "--resume", str(r)])[1],
                                "is not UTF-8 text"),
    "infinite learning rate": (lambda t, r: ["train", "--actor-lr", "inf", "--total-env-steps",
                                             "1024"], "'actor_lr' must be a finite number, got inf"),
    "yaml field that is not a number": (lambda t, r: ["train", "--config",
                                                      write_yaml(t, "critic_lr: .nan\n"),
                                                      "--total-env-steps", "1024"],
                                        "'critic_lr' must be a finite number, got nan"),
    # resumed silently on the defaults of the lines deleted
    "run config with deleted lines": (lambda t, r: (delete_lines(r / "config.yaml", "gamma:",
                                                                 "seed:"),
                                                    ["train", "--resume", str(r)])[1],
                                      "lacks field(s) the run was started with: gamma, seed"),
    "evaluating a run config with deleted lines": (
        lambda t, r: (delete_lines(r / "config.yaml", "env:"), ["evaluate", str(r)])[1],
        "lacks field(s) the run was started with: env"),
    "negative seed": (lambda t, r: ["train", "--seed", "-1"], "seed must be in [0, 2**31)"),
    "missing yaml file": (lambda t, r: ["train", "--config", str(t / "nope.yaml")],
                          "cannot read config file"),
    "unknown flag": (lambda t, r: ["train", "--learning-rate", "3"], "Unrecognized options"),
    "unknown command": (lambda t, r: ["fly"], "unknown command 'fly'"),
    "resume a directory that is not a run": (lambda t, r: ["train", "--resume", str(t / "x")],
                                             "x"),
    "missing checkpoint": (lambda t, r: (damage(r, "missing"), ["train", "--resume", str(r)])[1],
                           "checkpoint"),
    "truncated checkpoint": (lambda t, r: (damage(r, "truncated"), ["evaluate", str(r)])[1],
                             "checkpoint"),
    "corrupted checkpoint": (lambda t, r: (damage(r, "corrupted"), ["train", "--resume", str(r)])[1],
                             "checkpoint"),
    # New settings make a rewritten config.yaml differ from the saved one; the resume fails
    # on the checkpoint, so the run must keep the config its checkpoints were trained with.
    "resume with new settings from a corrupted checkpoint": (
        lambda t, r: (damage(r, "corrupted"), ["train", "--resume", str(r), "--total-env-steps",
                                                "4096", "--gamma", "0.9"])[1], "checkpoint"),
    "resume with another network shape": (lambda t, r: ["train", "--resume", str(r),
                                                        "--hidden-sizes", "8"], "hidden_sizes"),
    "resume with a recurrent core added": (lambda t, r: ["train", "--resume", str(r),
                                                         "--core", "lstm"], "core 'none' -> 'lstm'"),
    "resume reading the action mask": (lambda t, r: ["train", "--resume", str(r),
                                                      "--observe-action-mask"],
                                       "observe_action_mask False -> True"),
    # the checkpoints hold no observation statistics: the restore failed after config.yaml
    # was rewritten, so later resumes, evaluate and export failed too
    "resume normalising observations": (lambda t, r: ["train", "--resume", str(r),
                                                      "--normalize-obs", "True"],
                                        "normalize_obs False -> True"),
    "resume with the clipped objective": (lambda t, r: ["train", "--resume", str(r),
                                                        "--policy-loss", "clip"],
                                          "policy_loss 'pg' -> 'clip'"),
    "unknown core": (lambda t, r: ["train", "--core", "transformer"],
                     "invalid choice 'transformer' for argument '--core'"),
    "negative core size": (lambda t, r: ["train", "--core-size", "-1"], "core_size must be >= 0"),
    "negative eval_every": (lambda t, r: ["train", "--eval-every", "-1"], "eval_every must be >= 0"),
    "evaluation of no episodes": (lambda t, r: ["train", "--eval-every", "5", "--eval-episodes",
                                                "0"], "eval_episodes must be >= 1"),
    "unknown eval_every unit": (lambda t, r: ["train", "--eval-every-unit", "episodes"],
                                "invalid choice 'episodes' for argument '--eval-every-unit'"),
    "best of a run that kept none": (lambda t, r: ["evaluate", str(r), "--best"],
                                     "a run keeps one only when trained with --eval-every"),
    "best export of a run that kept none": (lambda t, r: ["export", str(r), "--best", "--out",
                                                       str(t / "policy")],
                                            "a run keeps one only when trained with --eval-every"),
    "run dir holding another run": (lambda t, r: ["train", "--run-dir", str(r)], "--overwrite"),
    "address nothing listens at": (lambda t, r: ["train", "--address", f"127.0.0.1:{free_port()}",
                                                 "--run-dir", str(r), "--overwrite"],
                                   "no Ray cluster answers at 127.0.0.1:"),
    "dashboard address for --address": (lambda t, r: ["train", "--address", "http://127.0.0.1:8265"],
                                        "the dashboard's, for `ray job submit`"),
    "address without a port": (lambda t, r: ["train", "--address", "headnode"],
                               "expected HOST:PORT, ray://HOST:PORT or auto"),
    "run dir below a file": (lambda t, r: ["train", "--run-dir", str(a_file(t) / "run")],
                             "is not writable"),
    "plot image below a file": (lambda t, r: ["plot", str(r), "--out", str(a_file(t) / "c.png")],
                                "cannot write in"),
    "bench plot below a file": (lambda t, r: ["bench", "--phases", "env", "--png",
                                              str(a_file(t) / "b.png")], "cannot write in"),
    "bench phase that does not exist": (lambda t, r: ["bench", "--phases", "nope"],
                                        "invalid choice 'nope' for argument '--phases'"),
    "bench compare with a missing file": (lambda t, r: ["bench", "--compare", str(t / "a.jsonl"),
                                                        str(t / "b.jsonl")], "no such file"),
}


def delete_lines(path: Path, *starts: str) -> None:
    """Delete the lines of `path` that start with any of `starts`."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(ln for ln in lines if not ln.startswith(starts)))


def latin1_yaml(directory: Path, name: str = "cfg.yaml") -> str:
    """A config file written in Latin-1 (its 'é' is the byte 0xe9, not UTF-8)."""
    path = directory / name
    path.write_bytes("# caf\u00e9 settings\nseed: 1\n".encode("latin-1"))
    return str(path)


def a_file(tmp_path: Path) -> Path:
    """A plain file, which no output can be written below."""
    f = tmp_path / "a-file"
    f.write_text("not a directory\n")
    return f


def snapshot(run: Path) -> dict:
    """Every file's bytes and every directory under `run` (None for a directory)."""
    return {p: p.read_bytes() if p.is_file() else None for p in run.rglob("*")}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2_and_keeps_data(case, tmp_path, good_run):
    make_argv, needle = CASES[case]
    run = copy_run(good_run, tmp_path / "run")
    argv = make_argv(tmp_path, run)  # damages the run's checkpoint where the case says so
    before = snapshot(run)  # taken after the damage: the command itself may change nothing
    out = dac_with_tests(*argv)
    assert out.returncode == 2, (case, out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("dac: error: ") and needle in last, (case, last)
    after = snapshot(run)
    changed = sorted(str(p.relative_to(run)) for p in before.keys() | after.keys()
                     if before.get(p, 0) != after.get(p, 0))
    assert not changed, f"{case}: the run directory changed: {changed}"


@pytest.mark.parametrize("ray_address, needle", [
    (None, "--address auto: no Ray cluster was started on this machine (no address in "),
    ("http://127.0.0.1:8265", "--address auto (RAY_ADDRESS: http://127.0.0.1:8265): give the "
                              "cluster's HOST:PORT"),
])
def test_address_auto_without_a_cluster_leaves_the_run_it_would_overwrite_intact(
        ray_address, needle, tmp_path, good_run):
    """`auto` is the cluster RAY_ADDRESS names, else the one `ray start` recorded in its
    address file (under RAY_TMPDIR, else TMPDIR, else /tmp); neither is there, so it is
    refused before TensorFlow or Ray loads, and the run it would replace stays intact."""
    run = copy_run(good_run, tmp_path / "run")
    before = snapshot(run)
    empty = tmp_path / "tmp"  # holds no ray/ray_current_cluster
    empty.mkdir()
    env = environ_without("RAY_ADDRESS", TMPDIR=str(empty), RAY_TMPDIR=str(empty))
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    out = python("-c", MAIN_THEN_IMPORTS, "train", "--address", "auto", "--run-dir", str(run),
                 "--overwrite", env=env, timeout=300)
    assert out.stdout.split()[-3:] == ["2", "False", "False"], (out.stdout, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("dac: error: --address auto") and needle in last, last
    assert snapshot(run) == before


# Another job's Ray on this machine: started by ray.init, so it wrote no address file.
OTHER_JOBS_RAY = ("import sys, ray; ray.init(num_cpus=1, include_dashboard=False); "
                  "print('up', flush=True); sys.stdin.read()")


def test_address_auto_never_joins_another_job_s_local_ray(tmp_path):
    """Ray's own `auto` scans the machine's processes for any running Ray: beside another
    job's local Ray it joined that job's cluster, or retried its GCS for 590 s."""
    import subprocess
    import sys
    import time

    empty = tmp_path / "tmp"
    empty.mkdir()
    other = subprocess.Popen([sys.executable, "-c", OTHER_JOBS_RAY], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=environ_without("RAY_ADDRESS"))
    try:
        assert other.stdout.readline().strip() == "up"
        env = environ_without("RAY_ADDRESS", TMPDIR=str(empty), RAY_TMPDIR=str(empty))
        start = time.monotonic()
        out = python("-c", MAIN_THEN_IMPORTS, "train", "--address", "auto", "--total-env-steps",
                     "1024", "--run-dir", str(tmp_path / "run"), env=env, timeout=120)
        assert time.monotonic() - start < 60
    finally:
        other.communicate("", timeout=60)
    assert out.stdout.split()[-3:] == ["2", "False", "False"], (out.stdout, out.stderr[-2000:])
    assert out.stderr.strip().splitlines()[-1].startswith(
        "dac: error: --address auto: no Ray cluster was started on this machine"), out.stderr
    assert not (tmp_path / "run").exists()


# `dac ARGV`, then its exit code and whether TensorFlow and Ray were imported
MAIN_THEN_IMPORTS = ("import sys; from distributed_ac.commands.main import main; "
                     "code = main(sys.argv[1:]); "
                     "print(code, 'tensorflow' in sys.modules, 'ray' in sys.modules)")


@pytest.mark.parametrize("argv", [
    ["evaluate", "no-such-run"], ["export", "no-such-run", "--out", "x"],
    ["plot", "no-such-run"], ["train", "--resume", "no-such-run"],
    ["train", "--config", "no-such.yaml"], ["bench", "--compare", "no-a.jsonl", "no-b.jsonl"]])
def test_a_bad_path_is_refused_before_tensorflow_or_ray_is_imported(argv, tmp_path):
    """`dac evaluate` imported TensorFlow (3 s, six lines of C++ logging) before it looked
    at the run directory."""
    out = python("-c", MAIN_THEN_IMPORTS, *argv, cwd=tmp_path, timeout=120)
    assert out.stdout.split() == ["2", "False", "False"], (out.stdout, out.stderr[-2000:])
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("dac: error:"), out.stderr


@pytest.mark.skipif(bool(glob.glob("/dev/nvidia[0-9]*")), reason="this machine has a GPU")
def test_device_gpu_without_a_gpu_is_one_line_before_ray_or_tensorflow_start(tmp_path):
    """It was a RuntimeError traceback from learner.pick_device, raised after Ray started."""
    out = python("-c", MAIN_THEN_IMPORTS, "train", "--device", "gpu",
                 "--run-dir", str(tmp_path / "run"), timeout=120)
    assert out.stdout.split() == ["2", "False", "False"], (out.stdout, out.stderr[-2000:])
    assert out.stderr.strip() == ("dac: error: --device gpu: this machine has no NVIDIA GPU "
                                  "(no /dev/nvidia* device); use --device auto or cpu")
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(bool(glob.glob("/dev/nvidia[0-9]*")), reason="this machine has a GPU")
def test_pick_device_refuses_gpu_with_bad_input_when_tensorflow_sees_none():
    from distributed_ac.core.errors import BadInput
    from distributed_ac.learning.tf_runtime import pick_device

    assert pick_device("auto") == pick_device("cpu") == "/CPU:0"
    with pytest.raises(BadInput, match="TensorFlow sees no GPU"):
        pick_device("gpu")
