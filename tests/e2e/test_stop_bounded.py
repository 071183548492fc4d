"""A stop signal ends a run in bounded time, whatever it is waiting on: an env step that
hangs (in a serial run, in a Ray worker, in an async sub-env's process), or a local Ray
whose raylet was killed. The run keeps its last complete update's checkpoint and no
process of it is left.

The bound asserted is EXIT_LIMIT_S, far above stop_timeout_s, so that a loaded machine
cannot fail it; what it catches is a run that never ends (the env blocks for ten
minutes). benchmarks measure how long stopping takes."""

import json
import os
import signal
import time

import psutil
import pytest
import ray  # noqa: F401  Ray puts its bundled psutil on sys.path
from helpers import environ_with_tests, popen_dac
from stopping import cmdline, communicate_or_kill, kill_tree, wait_for_rows, wait_until_gone

SMALL = ("--envs-per-worker", "2", "--rollout-length", "8", "--hidden-sizes", "16",
         "--total-env-steps", "100000000", "--log-every-s", "0.1", "--checkpoint-every", "1000")


def wait_for_mark(proc, mark, timeout=240) -> list[int]:
    """The pids the blocking env wrote to `mark`, once it has (the run is then stuck)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"dac train exited early ({proc.returncode}): {err[-2000:]}")
        if mark.exists() and mark.read_text().strip():
            return [int(p) for p in mark.read_text().split()]
        time.sleep(0.2)
    kill_tree(proc)
    pytest.fail("the env never blocked")


def descendants(pid) -> list:
    return psutil.Process(pid).children(recursive=True)


def stopped_with_its_last_update(proc, run_dir) -> dict:
    """SIGTERM: exit 143, the summary says SIGTERM, and the checkpoint it wrote on the way
    out is the last update's and loads."""
    from distributed_ac.trained.load import load_trained

    proc.send_signal(signal.SIGTERM)
    out, err = communicate_or_kill(proc)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stopped_by"] == "SIGTERM" and summary["updates"] >= 1, summary
    _, _, _, path = load_trained(run_dir)
    assert path.endswith(f"ckpt-{summary['updates']}")
    return summary


def test_sigterm_ends_a_serial_run_whose_env_step_hangs(tmp_path):
    mark, run_dir = tmp_path / "blocked", tmp_path / "run"
    proc = popen_dac("train", "--serial", "--env", "fakes:BlocksAfter", "--run-dir", str(run_dir),
                     "--stop-timeout-s", "4", *SMALL,
                     env=environ_with_tests(DAC_TEST_BLOCK_MARK=str(mark)))
    assert wait_for_mark(proc, mark) == [proc.pid]  # stuck in the driver's own env step
    stopped_with_its_last_update(proc, run_dir)


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_sigterm_ends_a_ray_run_whose_env_step_hangs_and_leaves_no_process(
        tmp_path, vectorization):
    """sync: the step hangs in the rollout worker; async: in each sub-env's own process,
    which must not outlive the worker that is killed."""
    mark, run_dir = tmp_path / "blocked", tmp_path / "run"
    proc = popen_dac("train", "--env", "fakes:BlocksAfter", "--num-workers", "1",
                     "--vectorization", vectorization, "--run-dir", str(run_dir), *SMALL,
                     env=environ_with_tests(DAC_TEST_BLOCK_MARK=str(mark)))
    blocked = wait_for_mark(proc, mark)
    children = descendants(proc.pid)
    assert set(blocked) <= {c.pid for c in children}
    stopped_with_its_last_update(proc, run_dir)
    assert not [(p.pid, cmdline(p)[:80]) for p in wait_until_gone(children)]


def test_sigterm_after_the_raylet_was_killed_ends_the_run_and_every_process(tmp_path):
    run_dir = tmp_path / "run"
    proc = popen_dac("train", "--num-workers", "1", "--run-dir", str(run_dir), *SMALL,
                     env=environ_with_tests())
    wait_for_rows(proc, run_dir / "metrics.jsonl", timeout=240)
    children = descendants(proc.pid)
    raylets = [c for c in children if "raylet" in cmdline(c)]
    assert raylets, [cmdline(c)[:80] for c in children]
    for raylet in raylets:
        raylet.kill()
    proc.send_signal(signal.SIGTERM)
    out, err = communicate_or_kill(proc)
    assert proc.returncode != 0 and "Traceback" not in err, err[-3000:]
    assert not [(p.pid, cmdline(p)[:80]) for p in wait_until_gone(children)]
    assert not os.path.exists(run_dir / "checkpoints" / "ckpt-0_temp")
