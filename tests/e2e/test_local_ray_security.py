"""Local mode binds every Ray server to 127.0.0.1 and starts no dashboard unless asked."""

import ipaddress
import time

import psutil
import pytest
from helpers import dac, environ_without, popen_dac

pytestmark = pytest.mark.e2e


def listening(root: int) -> list[tuple[str, int, str]]:
    procs = {root: "dac"}
    for p in psutil.Process(root).children(recursive=True):
        try:
            procs[p.pid] = " ".join(p.cmdline())[:80]
        except psutil.Error:
            pass
    return [(c.laddr.ip, c.laddr.port, procs[c.pid]) for c in psutil.net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.pid in procs]


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    return addr.is_loopback or getattr(addr, "ipv4_mapped", None) is not None and addr.ipv4_mapped.is_loopback


def test_local_training_listens_on_loopback_only_and_serves_no_dashboard(tmp_path):
    # one worker: the servers are the same at any count, and auto is cores - 1
    proc = popen_dac("train", "--num-workers", "1", "--total-env-steps", "3000000",
                     "--run-dir", str(tmp_path / "run"))
    try:
        deadline, sockets = time.monotonic() + 120, []
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(2)
            sockets = listening(proc.pid)
            if any("RolloutWorker" in name or "IDLE" in name for _, _, name in sockets):
                break
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert sockets, "no listening sockets found in the run's process tree"
        exposed = [s for s in sockets if not is_loopback(s[0])]
        assert not exposed, exposed
        assert 8265 not in {port for _, port, _ in sockets}, sockets  # no dashboard
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_local_run_keeps_token_authentication_and_prints_only_its_own_lines(tmp_path):
    """Ray's default for a new local cluster is token authentication, with a line about it
    on every start; asked for by name it stays on, and the console holds our lines only."""
    out = dac("train", "--num-workers", "1", "--total-env-steps", "1024", "--log-every-s",
              "1000", "--run-dir", str(tmp_path / "run"), env=environ_without("RAY_AUTH_MODE"),
              timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ours = ("dac: ", "run directory ", "learning rates ", "learner on ", "worker 0: ",
            "env_steps ")
    strangers = [line for line in out.stderr.splitlines() if not line.startswith(ours)]
    assert not strangers, strangers
