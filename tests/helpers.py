"""What many tests do alike: run `dac` or Python in a child process (with tests/ on its
PYTHONPATH where the child imports fakes or the test packages), drive the CLI in this
process, train a short run that prints nothing, and read what a run directory holds.

Imports only the standard library at the top: the unit tests import this module too."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from paths import TESTS


# ---- child processes --------------------------------------------------------------------

def run(cmd, timeout=None, env=None, cwd=None, check=False) -> subprocess.CompletedProcess:
    """`cmd` in a child process, to its end: its exit status, stdout and stderr as text.
    env None: this process's environment."""
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=cwd, check=check)


def python(*args, **kwargs) -> subprocess.CompletedProcess:
    """This interpreter with `args` ("-c", code, ... or "-m", module, ...), as run() runs it."""
    return run([sys.executable, *args], **kwargs)


def dac(*argv, **kwargs) -> subprocess.CompletedProcess:
    """`dac ARGV` (python -m distributed_ac), as run() runs it."""
    return python("-m", "distributed_ac", *argv, **kwargs)


def environ_with_tests(*paths, **variables) -> dict:
    """This process's environment with tests/ (then `paths`) first on PYTHONPATH and
    `variables` set: a child given it imports fakes' envs and the test packages, and so
    do the Ray workers it starts (a local Ray's raylet inherits the driver's environment)."""
    pythonpath = os.pathsep.join([TESTS, *paths, os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": pythonpath, **variables}


def environ_without(*names, **variables) -> dict:
    """This process's environment less the variables `names`, with `variables` set."""
    return {**{k: v for k, v in os.environ.items() if k not in names}, **variables}


def dac_with_tests(*argv, timeout=300, env=None) -> subprocess.CompletedProcess:
    """dac() in a child that imports tests/'s modules (environ_with_tests, as it is at the
    call); env: variables to set besides."""
    return dac(*argv, timeout=timeout, env=environ_with_tests(**(env or {})))


def popen_dac(*argv, env=None, **popen) -> subprocess.Popen:
    """`dac ARGV` started in a child and left running, its stdout and stderr piped as
    text unless `popen` says otherwise; env None: this process's environment."""
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
    return subprocess.Popen([sys.executable, "-m", "distributed_ac", *argv], env=env, **options)


def free_port() -> int:
    """A port nothing listens on (the OS just handed it out and it was closed again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_yaml(directory, data, name: str = "cfg.yaml") -> str:
    """`data` (YAML text, or what yaml.safe_dump writes of it) as the file `name` in
    `directory`; its path."""
    import yaml

    path = Path(directory) / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


# ---- the CLI and training in this process -----------------------------------------------

def cli_run(capsys, *argv) -> tuple[int, str, str]:
    """`dac ARGV` in this process: its exit code, and what it wrote to stdout and stderr."""
    from distributed_ac.commands import main as cli

    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_train(capsys, *argv, err_tail: int = 3000) -> tuple[dict, str]:
    """`dac train ARGV` in this process, which must end with exit code 0 (else the end of
    its stderr is the failure's message): its summary (stdout's last line) and stderr."""
    code, out, err = cli_run(capsys, "train", *argv)
    assert code == 0, err[-err_tail:]
    return json.loads(out.strip().splitlines()[-1]), err


def quiet(cfg, every_s: float = 1.0):
    """Progress over cfg's budget written to a StringIO: nothing on the console."""
    import io

    from distributed_ac.run.metrics import ConsoleProgress

    return ConsoleProgress(cfg.total_env_steps, every_s, io.StringIO())


def train_quietly(cfg, run_dir, every_s: float = 1.0, **kwargs) -> dict:
    """train(cfg) into run_dir with quiet() progress; kwargs go to train (resume=...)."""
    from distributed_ac.training.trainer import train

    return train(cfg, run_dir=run_dir, progress=quiet(cfg, every_s), **kwargs)


def train_updates(base: dict, run_dir, updates: int, resume: bool = False, progress=None,
                  **fields) -> dict:
    """A run of Config(base, then fields) for `updates` updates of one batch (base's
    envs_per_worker x rollout_length steps) each, quiet unless `progress` is given:
    a fixed budget makes the K-then-M-updates resume tests' runs."""
    from distributed_ac.config.schema import Config
    from distributed_ac.training.trainer import train

    batch = base["envs_per_worker"] * base["rollout_length"]
    cfg = Config(**{**base, **fields}, total_env_steps=updates * batch)
    return train(cfg, run_dir=run_dir, resume=resume, progress=progress or quiet(cfg))


# ---- what a run directory holds ---------------------------------------------------------

def logged_env_steps(run_dir) -> list[int]:
    """The env_steps of each row metrics.jsonl holds so far ([] before the first)."""
    from distributed_ac.run.metrics import read_rows

    path = Path(run_dir) / "metrics.jsonl"
    return [r["env_steps"] for r in read_rows(path)] if path.exists() else []


def tensorboard_scalars(run_dir) -> dict[tuple[str, int], float]:
    """Every scalar of the run's TensorBoard events, by (tag, step)."""
    import tensorflow as tf

    found = {}
    for path in (Path(run_dir) / "tb").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for v in event.summary.value:
                assert v.metadata.plugin_data.plugin_name == "scalars"
                found[(v.tag, event.step)] = float(tf.make_ndarray(v.tensor))
    return found


# ---- exports ----------------------------------------------------------------------------

def export_acts_as_numpy_policy(run_dir, saved_model, encoder: str):
    """The SavedModel `dac export` wrote from `run_dir` against the run's NumPy policy:
    asserts the run's encoder is `encoder` and that the export's greedy actions on 256
    random observations are the NumPy policy's, both actions occurring (so the argmax
    really compared); returns (the loaded SavedModel, the run's Trained, the obs)."""
    import numpy as np
    import tensorflow as tf

    from distributed_ac.acting.numpy_policy import Policy
    from distributed_ac.trained.load import load_trained

    _, space, learner, _ = load_trained(run_dir)
    assert learner.spec.encoder == encoder
    model = tf.saved_model.load(str(saved_model))
    obs = np.random.default_rng(1).normal(size=(256, space.obs_dim)).astype(np.float32)
    policy = Policy(space, learner.spec)
    policy.load(learner.weights())
    _, expected, _ = policy.act(obs, None, deterministic=True)
    np.testing.assert_array_equal(model.action(obs).numpy(), expected)
    assert len(np.unique(expected)) > 1
    return model, learner, obs

