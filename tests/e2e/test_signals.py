"""Stopping cleanly: SIGTERM to a real `dac train` on local Ray ends it with a checkpoint
that loads and no Ray process left behind; in-process, SIGINT stops the loop after the
current update and a second Ctrl-C aborts at once.

How long stopping takes is not asserted (benchmarks measure speed; a loaded 2-core
machine stretches it): the limits below only keep a hung run from hanging the suite.
"""

import io
import json
import os
import signal
import time

import psutil  # noqa: E402
import pytest
import ray  # noqa: E402,F401  Ray puts its bundled psutil on sys.path
from helpers import popen_dac
from stopping import alive, cmdline, communicate_or_kill, wait_for_rows, wait_until_gone

from distributed_ac.config.schema import Config
from distributed_ac.run import rundir
from distributed_ac.run.metrics import ConsoleProgress
from distributed_ac.training.signals import StopSignals
from distributed_ac.training.trainer import train


def test_sigterm_to_dac_train_checkpoints_shuts_ray_down_and_exits(tmp_path):
    run_dir = tmp_path / "run"
    proc = popen_dac("train", "--run-dir", str(run_dir), "--num-workers", "1",
                     "--envs-per-worker", "4", "--rollout-length", "8", "--hidden-sizes", "16",
                     "--total-env-steps", "100000000", "--log-every-s", "0.1")
    wait_for_rows(proc, run_dir / "metrics.jsonl", timeout=240)
    children = psutil.Process(proc.pid).children(recursive=True)
    assert any("raylet" in cmdline(c) for c in alive(children))  # really on Ray

    proc.send_signal(signal.SIGTERM)
    out, err = communicate_or_kill(proc)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stopped_by"] == "SIGTERM" and summary["updates"] >= 1

    # the checkpoint it wrote on the way out loads, at the update it stopped on
    from distributed_ac.trained.load import load_trained

    _, _, _, path = load_trained(run_dir)
    assert path.endswith(f"ckpt-{summary['updates']}")

    left = [(p.pid, cmdline(p)[:80]) for p in wait_until_gone(children)]
    assert not left, f"processes left behind: {left}"


def test_sigint_in_process_stops_after_the_current_update_with_a_checkpoint(tmp_path):
    cfg = Config(serial=True, num_workers=1, mode="sync", envs_per_worker=4, rollout_length=8,
                 hidden_sizes=(16,), total_env_steps=10_000 * 32, log_every_s=0.001)

    class InterruptAfterThree(ConsoleProgress):
        sent = False

        def update(self, env_steps, sps, mean_return, force=False):
            if env_steps == 3 * 32 and not self.sent:
                self.sent = True
                os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C would, mid-run
            super().update(env_steps, sps, mean_return, force)

    before = signal.getsignal(signal.SIGINT)
    summary = train(cfg, run_dir=tmp_path / "run",
                    progress=InterruptAfterThree(cfg.total_env_steps, 1.0, io.StringIO()))
    assert summary["stopped_by"] == "SIGINT" and summary["updates"] == 3
    assert summary["checkpoint"].endswith("ckpt-3")
    assert rundir.open_run(tmp_path / "run").has_checkpoint()
    assert signal.getsignal(signal.SIGINT) is before  # the previous handler is back


def test_a_second_ctrl_c_aborts_at_once():
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.received == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs at the next bytecode; never gets here


def test_a_signal_during_start_up_is_acted_on_between_steps_not_inside_them():
    """Start-up's Ctrl-C is a flag checked between steps: raised inside whatever the main
    thread ran, it once landed inside an import and left the import lock held, and the
    learner thread importing TensorFlow waited forever (1 run in ~10 hung)."""
    from distributed_ac.core.errors import Interrupted
    from distributed_ac.envs.vector import probe_space
    from distributed_ac.training.startup import start_pool_and_learner

    cfg = Config(serial=True, num_workers=1, envs_per_worker=2, rollout_length=4,
                 hidden_sizes=(8,))
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGINT)  # while nothing checks: only the flag is set
        assert stop.received == signal.SIGINT
        with pytest.raises(Interrupted) as e:
            start_pool_and_learner(cfg, probe_space(cfg.env, cfg.vectorization), None, False, stop)
    assert e.value.signum == signal.SIGINT


def test_ctrl_c_during_start_up_is_one_line_exit_130_and_leaves_no_ray_behind(tmp_path):
    """Ctrl-C while Ray starts and TensorFlow loads on the learner thread: one line, exit
    130, no traceback, no hang (see the test above for what used to go wrong)."""
    proc = popen_dac("train", "--run-dir", str(tmp_path / "run"), "--num-workers", "1",
                     "--total-env-steps", "100000000")
    deadline = time.monotonic() + 120
    children = []
    while time.monotonic() < deadline and proc.poll() is None:  # wait until Ray is starting
        children = psutil.Process(proc.pid).children(recursive=True)
        if any("gcs_server" in cmdline(c) for c in alive(children)):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = communicate_or_kill(proc)
    assert proc.returncode == 128 + signal.SIGINT, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == "dac: interrupted", err[-2000:]
    left = wait_until_gone(children)
    assert not left, [cmdline(c)[:80] for c in left]
