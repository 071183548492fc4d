"""No process outlives the `dac` command that started it: a bench phase's child process
(TensorFlow, ~1 GB) stops with its parent on SIGTERM, SIGINT and SIGKILL alike."""

import os
import signal
import subprocess
import time

import psutil
import pytest
from helpers import popen_dac

from distributed_ac.core.processes import run_in_child

DEADLINE_S = 60.0


def _sleep_then_return(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _raise() -> None:
    raise ValueError("in the child")


def test_run_in_child_returns_the_childs_value_and_raises_its_exception():
    assert run_in_child(_sleep_then_return, 0.01) == 0.01
    with pytest.raises(ValueError, match="in the child"):
        run_in_child(_raise)


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_S:.0f} s: {what}")
        time.sleep(0.1)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _bench_with_a_child():
    """`dac bench` measuring the learner, which runs in a child process; returns the
    command's process once that child exists, and the child."""
    proc = popen_dac("bench", "--phases", "learner", "--sweep-workers", "1",
                     "--rollout-length", "4", "--hidden-sizes", "8", "--repeats", "50",
                     "--min-time", "1", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     text=False,
                     # SIGINT as a terminal delivers it: a test run started in the
                     # background of a script inherits it ignored, and Python then
                     # keeps ignoring it
                     preexec_fn=_default_sigint)
    parent = psutil.Process(proc.pid)

    def phase_child():
        return [c for c in parent.children(recursive=True)
                if "spawn_main" in " ".join(c.cmdline())]

    _wait_for(phase_child, "the phase's child process started")
    return proc, parent.children(recursive=True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_to_dac_bench_ends_its_child_processes_too(sig):
    proc, children = _bench_with_a_child()
    os.kill(proc.pid, sig)
    proc.wait(timeout=DEADLINE_S)
    _wait_for(lambda: not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE
                              for c in children), f"children of dac bench ended after {sig.name}")
