"""StopSignals' deadline: half of timeout_s after a stop signal, a wait marked
abandonable that still blocks is ended by Overdue; code outside such a wait is never
interrupted by it. The end_descendants sweep finds and ends a process tree."""

import os
import signal
import subprocess
import sys
import time

import pytest

from distributed_ac.training.signals import Overdue, StopSignals


def test_a_blocked_abandonable_wait_is_ended_half_way_to_the_deadline():
    with StopSignals(timeout_s=1.0) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.stopped() == signal.SIGTERM
        with pytest.raises(Overdue), stop.abandonable():
            time.sleep(60)  # a hung env step; without Overdue the test would sit here


def test_outside_an_abandonable_wait_the_deadline_interrupts_nothing():
    with StopSignals(timeout_s=0.4) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1.0)  # past the half-way mark: the sleep runs to its end
        assert stop.received == signal.SIGTERM


def test_without_a_signal_an_abandonable_wait_is_left_alone():
    with StopSignals(timeout_s=0.2) as stop, stop.abandonable():
        time.sleep(0.5)
    assert stop.received is None


SWEEP = """
import json, subprocess, sys, time
from distributed_ac.core.processes import descendants, end_descendants
inner = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", inner])
deadline = time.monotonic() + 60
while len(descendants()) < 2 and time.monotonic() < deadline:  # the grandchild started
    time.sleep(0.05)
tree = descendants()
ended = end_descendants(grace_s=5.0)
child.wait(timeout=30)
print(json.dumps({"child": child.pid, "tree": tree, "ended": ended, "left": descendants()}))
"""


def test_end_descendants_ends_children_and_grandchildren():
    """In a process of its own: the sweep would end this test process's children too."""
    import json

    out = subprocess.run([sys.executable, "-c", SWEEP], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["child"] in got["tree"] and len(got["tree"]) == 2
    assert set(got["tree"]) <= set(got["ended"]) and got["left"] == []
    for pid in got["tree"]:  # the grandchild, adopted by init, is gone as well
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


HANG = """
import os, signal, subprocess, sys, time
from distributed_ac.training.signals import StopSignals, exit_when_overdue
exit_when_overdue()
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(sleeper.pid, flush=True)
with StopSignals(timeout_s=1.0):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(600)  # not an abandonable wait: only the deadline's exit ends this
"""


def test_at_the_deadline_dac_ends_its_processes_and_exits_128_plus_the_signal():
    proc = subprocess.run([sys.executable, "-c", HANG], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-2000:]
    assert "still running 1 s after SIGTERM" in proc.stderr
    sleeper = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{sleeper}") and time.monotonic() < deadline:
        time.sleep(0.1)  # ended by the sweep; init reaps it once it is gone
    assert not os.path.exists(f"/proc/{sleeper}")
