"""Watching a `dac train` started in a child: its metrics rows, its processes, and
ending them if a test's limit passes (the stop tests' shared helpers)."""

import subprocess
import time

import psutil
import pytest
import ray  # noqa: F401  Ray puts its bundled psutil on sys.path

EXIT_LIMIT_S = 120  # for a stopped run (or its Ray processes) to be gone: generous, not a target


def wait_for_rows(proc, metrics, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"dac train exited early ({proc.returncode}): {err[-2000:]}")
        if metrics.exists() and metrics.read_text().count("\n") >= 2:
            return
        time.sleep(0.2)
    kill_tree(proc)
    pytest.fail("dac train logged no metrics rows in time")


def cmdline(p) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # it exited meanwhile
        return ""


def alive(procs):
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:  # gone between the two checks
            pass
    return out


def wait_until_gone(procs, timeout=EXIT_LIMIT_S):
    """Poll until none of `procs` is alive (zombies count as gone) or the deadline passes;
    return those still alive."""
    deadline = time.monotonic() + timeout
    while alive(procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(procs)


def kill_tree(proc) -> None:
    """Kill a `dac train` this test started and every process under it (its Ray servers
    would outlive it otherwise)."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        children = []
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            pass
    proc.kill()


def communicate_or_kill(proc, timeout=EXIT_LIMIT_S):
    """proc.communicate(timeout); a process still running by then is killed (kill_tree)
    and the test fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        out, err = proc.communicate()
        pytest.fail(f"still running {timeout} s after the signal: {err[-2000:]}")
