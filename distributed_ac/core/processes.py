"""Child processes that never outlive the `dac` command that started them.

A spawned child keeps running when its parent is killed (SIGTERM's default action ends
only the parent), holding the caller's stdout pipe open and its memory. Two guards:
- every child asks the kernel for SIGTERM when its parent dies (Linux PR_SET_PDEATHSIG),
  which covers a parent that is killed outright;
- `adopt_orphans` makes `dac` inherit what its children leave (a dead raylet's
  workers), and `end_descendants` ends whatever is still under it as it exits;
- `run_in_child` and `stop_children` terminate and reap children on any exception in
  the parent, KeyboardInterrupt and SystemExit included, and `exit_on_sigterm` turns
  SIGTERM into SystemExit so that those cleanups run.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36
JOIN_S = 5.0  # how long a terminated child gets before it is killed


def _prctl(option: int, value: int) -> bool | None:
    """Linux prctl(option, value): whether it succeeded; None where there is no prctl
    (another OS, or none in this libc)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return None


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to send this process SIGTERM when its parent exits (Linux; a no-op
    elsewhere); exit at once if `parent_pid` already has (it died before the request)."""
    if _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM)) is None:
        return  # no prctl here: the parent's cleanup remains
    if os.getppid() != parent_pid:
        os._exit(1)


def adopt_orphans() -> bool:
    """Make this process the one that inherits its descendants whose parent dies (Linux
    PR_SET_CHILD_SUBREAPER), instead of init: the workers of a local Ray whose raylet
    was killed stay findable by end_descendants. False where the OS has no such call."""
    return bool(_prctl(PR_SET_CHILD_SUBREAPER, 1))


def descendants(pid: int | None = None) -> list[int]:
    """Every live process under `pid` (this one by default), from /proc; [] elsewhere."""
    root, children = pid or os.getpid(), {}
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []
    for name in names:
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_descendants(grace_s: float = 2.0) -> list[int]:
    """SIGTERM every process under this one, SIGKILL those still there after `grace_s`;
    return the pids that were found."""
    pids = descendants()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + grace_s
            while set(descendants()) & set(pids) and time.monotonic() < deadline:
                time.sleep(0.05)
    return pids


@contextlib.contextmanager
def exit_on_sigterm():
    """While inside: SIGTERM raises SystemExit(143) in the main thread, so `finally`
    blocks run. The previous handler comes back on exit."""
    def handle(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_children(procs: list) -> None:
    """Terminate, then kill if need be, and reap each child still alive."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(JOIN_S)
        if p.is_alive():
            p.kill()
            p.join()


def _call(parent_pid, fn, args, queue) -> None:
    die_with_parent(parent_pid)
    try:
        queue.put((True, fn(*args)))
    except BaseException as e:  # the parent re-raises it
        queue.put((False, e))


def run_in_child(fn, *args):
    """fn(*args) in a fresh spawned process; its return value comes back, or its exception
    is raised here. The child is stopped if this process stops waiting for any reason."""
    ctx = mp.get_context("spawn")  # fork after TensorFlow/Ray threads exist can deadlock
    queue = ctx.Queue()
    proc = ctx.Process(target=_call, args=(os.getpid(), fn, args, queue))
    proc.start()
    try:
        ok, value = queue.get()
    finally:
        stop_children([proc])
    if not ok:
        raise value
    return value
