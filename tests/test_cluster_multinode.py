"""A real multi-node Ray cluster on one machine (two raylets via ray.cluster_utils):
`dac train --address` spreads workers over both nodes and learns, `ray job submit`
runs a training job to completion, and the cluster is left as it was found."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys

import psutil
import pytest
from ray.cluster_utils import Cluster

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="module")
def cluster():
    # Job entrypoints run `dac` through the nodes' PATH: make it this interpreter's bin.
    old_path = os.environ["PATH"]
    os.environ["PATH"] = BIN + os.pathsep + old_path
    port = free_port()
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": True, "dashboard_port": port,
        "dashboard_host": "127.0.0.1"})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    pids = [p.process.pid for node in c.list_all_nodes()
            for procs in node.all_processes.values() for p in procs]
    yield c, port
    c.shutdown()
    os.environ["PATH"] = old_path
    psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=15)
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not alive, f"cluster processes left running: {alive}"


def run(cmd, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_training_on_two_nodes_spreads_workers_and_learns(cluster):
    c, _ = cluster
    # Sync mode: every update takes one batch from each worker, so what is learned does
    # not hang on which node answers first. Async with two 1-CPU nodes ran at lag 2 and
    # read 48-80 at 100k steps from one run to the next; sync reads ~195 (serial: 194.9).
    out = run([sys.executable, "-m", "distributed_ac.cli", "train", "--address", c.address,
               "--mode", "sync", "--num-workers", "2", "--total-env-steps", "100000",
               "--seed", "0"])
    assert out.returncode == 0, out.stderr[-3000:]
    nodes = set(re.findall(r"worker \d+: pid \d+ on node \S+ \((\w+)\)", out.stderr))
    assert len(nodes) == 2, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["env_steps"] >= 100000
    assert summary["mean_return_100"] >= 120, summary  # a random policy averages about 22


def test_ray_job_submit_runs_a_short_training_to_completion(cluster):
    _, port = cluster
    ray_cli = shutil.which("ray", path=BIN)
    out = run([ray_cli, "job", "submit", "--address", f"http://127.0.0.1:{port}", "--",
               "dac", "train", "--address", "auto", "--num-workers", "2",
               "--total-env-steps", "20000"])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "succeeded" in out.stdout
    assert '"env_steps": 20' in out.stdout  # the job's own summary line made it to the logs


def test_without_address_training_starts_its_own_ray_even_with_a_cluster_at_ray_address(
        cluster, tmp_path):
    """RAY_ADDRESS names a running cluster (as after `export RAY_ADDRESS=...` for Ray's
    CLIs): local mode still starts its own Ray and says so. Joining would refuse num_cpus."""
    c, _ = cluster
    env = {**os.environ, "RAY_ADDRESS": c.address}
    out = subprocess.run([sys.executable, "-m", "distributed_ac.cli", "train",
                          "--total-env-steps", "2048", "--run-dir", str(tmp_path / "run")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"RAY_ADDRESS={c.address} is not used" in out.stderr
    placed = set(re.findall(r"worker \d+: pid \d+ on node \S+ \((\w+)\)", out.stderr))
    cluster_nodes = {n.node_id[:8] for n in c.list_all_nodes()}
    assert placed and not placed & cluster_nodes, (placed, cluster_nodes)


PENDING_SCRIPT = """
import logging, os, sys, threading
import ray
from distributed_ac import distributed
from distributed_ac.config import Config

warned = threading.Event()
class Catch(logging.Handler):
    def emit(self, record):
        print(record.getMessage(), flush=True)
        warned.set()
logging.getLogger("distributed_ac.distributed").addHandler(Catch(logging.WARNING))

distributed.start_ray(sys.argv[1], False)
pool = distributed.RayPool(Config(envs_per_worker=2), 3)  # 3 x 1 CPU; the cluster has 2
threading.Thread(target=pool.placement, kwargs={"warn_after_s": 3}, daemon=True).start()
warned.wait(120)
for w in pool.workers:
    ray.kill(w)
os._exit(0 if warned.is_set() else 3)
"""


def test_workers_the_cluster_has_no_room_for_are_waited_for_with_a_warning(cluster):
    c, _ = cluster
    out = run([sys.executable, "-c", PENDING_SCRIPT, c.address], timeout=180)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert re.search(r"1 of 3 rollout workers not started after 3 s: each needs 1 CPU and the "
                     r"cluster has 0 of 2 free", out.stdout), out.stdout[-2000:]
