"""A real multi-node Ray cluster on one machine (two raylets via ray.cluster_utils):
`dac train --address` spreads workers over both nodes and learns, `ray job submit`
runs a training job to completion, a run outlives the loss of a worker node, and the
cluster is left as it was found."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest
from failed_runs import crash_report
from helpers import dac, free_port, logged_env_steps, popen_dac, python, run
from ray.cluster_utils import Cluster

pytestmark = pytest.mark.e2e

BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="module")
def cluster():
    # Job entrypoints run `dac` through the nodes' PATH: make it this interpreter's bin.
    old_path = os.environ["PATH"]
    os.environ["PATH"] = BIN + os.pathsep + old_path
    port = free_port()
    # The head's job agent would listen on Ray's fixed default port (52365), which any
    # other Ray on this machine may hold already: then no job could ever be submitted.
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": True, "dashboard_port": port,
        "dashboard_host": "127.0.0.1", "dashboard_agent_listen_port": free_port()})
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


def test_training_on_two_nodes_spreads_workers_and_learns(cluster, tmp_path):
    c, _ = cluster
    # Sync mode: every update takes one batch from each worker, so what is learned does
    # not hang on which node answers first. Async with two 1-CPU nodes ran at lag 2 and
    # read 48-80 at 100k steps from one run to the next; sync joins the batches in worker
    # order and reads 129.2 with this seed, run after run.
    out = dac("train", "--address", c.address, "--mode", "sync", "--num-workers", "2",
              "--total-env-steps", "100000", "--seed", "0", "--run-dir", str(tmp_path / "run"),
              timeout=600)
    assert out.returncode == 0, crash_report(out)
    nodes = set(re.findall(r"worker \d+: pid \d+ on node \S+ \((\w+)\)", out.stderr))
    assert len(nodes) == 2, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["env_steps"] >= 100000
    assert summary["mean_return_100"] >= 90, summary  # a random policy averages about 22


NO_AGENT = "No available agent to submit job"
AGENT_WAIT_S = 60.0


def submit_job(port: int, *entrypoint: str) -> subprocess.CompletedProcess:
    """`ray job submit`, submitted again for up to AGENT_WAIT_S while the head answers
    that no job agent is available (the node's agent registers some seconds after the
    node itself), as a user would; any other answer is returned as it is."""
    ray_cli = shutil.which("ray", path=BIN)
    deadline = time.monotonic() + AGENT_WAIT_S
    while True:
        out = run([ray_cli, "job", "submit", "--address", f"http://127.0.0.1:{port}", "--",
                   *entrypoint], timeout=600)
        if out.returncode == 0 or NO_AGENT not in out.stdout + out.stderr:
            return out
        if time.monotonic() > deadline:
            pytest.fail(f"no job agent after {AGENT_WAIT_S:.0f} s: {out.stdout[-1000:]}"
                        f"{out.stderr[-1000:]}")
        time.sleep(2.0)


def test_ray_job_submit_runs_a_short_training_to_completion(cluster, tmp_path):
    _, port = cluster
    out = submit_job(port, "dac", "train", "--address", "auto", "--num-workers", "2",
                     "--total-env-steps", "20000", "--run-dir", str(tmp_path / "run"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "succeeded" in out.stdout
    assert '"env_steps": 20' in out.stdout  # the job's own summary line made it to the logs


def test_without_address_training_starts_its_own_ray_even_with_a_cluster_at_ray_address(
        cluster, tmp_path):
    """RAY_ADDRESS names a running cluster (as after `export RAY_ADDRESS=...` for Ray's
    CLIs): local mode still starts its own Ray and says so. Joining would refuse num_cpus."""
    c, _ = cluster
    out = dac("train", "--num-workers", "1", "--total-env-steps", "2048",
              "--run-dir", str(tmp_path / "run"), env={**os.environ, "RAY_ADDRESS": c.address},
              timeout=300)
    assert out.returncode == 0, crash_report(out)
    assert f"RAY_ADDRESS={c.address} is not used" in out.stderr
    placed = set(re.findall(r"worker \d+: pid \d+ on node \S+ \((\w+)\)", out.stderr))
    cluster_nodes = {n.node_id[:8] for n in c.list_all_nodes()}
    assert placed and not placed & cluster_nodes, (placed, cluster_nodes)


PENDING_SCRIPT = """
import logging, os, sys, threading
import ray
from distributed_ac.pool import ray_pool
from distributed_ac.config.schema import Config
from distributed_ac.config.plan import make_plan

warned = threading.Event()
class Catch(logging.Handler):
    def emit(self, record):
        print(record.getMessage(), flush=True)
        warned.set()
logging.getLogger("distributed_ac.pool.ray_pool").addHandler(Catch(logging.WARNING))

ray_pool.start_ray(sys.argv[1], False)
pool = ray_pool.RayPool(Config(envs_per_worker=2), make_plan(Config(envs_per_worker=2), 3))  # 3 x 1 CPU; the cluster has 2
threading.Thread(target=pool.placement, kwargs={"warn_after_s": 3}, daemon=True).start()
warned.wait(120)
for w in pool.workers:
    ray.kill(w)
os._exit(0 if warned.is_set() else 3)
"""


def test_workers_the_cluster_has_no_room_for_are_waited_for_with_a_warning(cluster):
    c, _ = cluster
    out = python("-c", PENDING_SCRIPT, c.address, timeout=180)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    # at least the one that cannot fit; on a loaded machine the two that fit may still
    # be starting after 3 s too
    assert re.search(r"[123] of 3 rollout workers not started after 3 s: each needs 1 CPU and "
                     r"the cluster has 0 of 2 free", out.stdout), out.stdout[-2000:]


def node_pids(node) -> set[int]:
    """A node's Ray processes and their children (the worker processes its raylet started)."""
    pids = set()
    for procs in node.all_processes.values():
        for p in procs:
            pids.add(p.process.pid)
            try:
                pids.update(c.pid for c in psutil.Process(p.process.pid).children(recursive=True))
            except psutil.NoSuchProcess:
                pass
    return pids


@pytest.fixture
def lossy_cluster():
    """A cluster of its own for a test that kills one of its nodes: a head that keeps its
    CPUs for the driver (no Ray CPUs) and two 4-CPU worker nodes. Yields the cluster and
    a set of pids, to which the test adds the processes of the node it kills; all of
    them must be gone afterwards, the lost node's orphaned workers included."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        c.add_node(num_cpus=4)
    c.wait_for_nodes()
    pids = set().union(*(node_pids(n) for n in c.list_all_nodes()))
    yield c, pids
    pids |= set().union(*(node_pids(n) for n in c.list_all_nodes()))
    c.shutdown()
    psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=15)
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not alive, f"cluster processes left running: {alive}"


PLACED = r"worker (\d+): pid \d+ on node \S+ \((\w+)\)"


def lose_busiest_node(c, proc, run, stderr_path, at_env_steps: int, pids: set) -> tuple:
    """Once the run has logged `at_env_steps`, SIGKILL every process of the worker node
    that holds the most rollout workers, raylet first, as when the machine dies. Paced by
    the run's progress, not the clock. Returns the node's id (8 characters) and the slots
    of the workers that were on it.

    The workers die with the raylet here: left alone, a worker notices its raylet's death
    only after a second or so, and serves the driver directly until then."""
    deadline = time.monotonic() + 240
    while (logged_env_steps(run) or [0])[-1] < at_env_steps:
        assert proc.poll() is None, f"the run ended first:\n{stderr_path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "the run made no progress in 240 s"
        time.sleep(0.1)
    placed = re.findall(PLACED, stderr_path.read_text())
    on = {n.node_id[:8]: {int(w) for w, node in placed if node == n.node_id[:8]}
          for n in c.worker_nodes}
    victim = max(c.worker_nodes, key=lambda n: len(on[n.node_id[:8]]))
    raylet = victim.all_processes["raylet"][0].process.pid
    doomed = node_pids(victim)
    pids |= doomed
    for pid in [raylet, *(doomed - {raylet})]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    c.remove_node(victim, allow_graceful=False)  # reaps what it started; forgets the node
    return victim.node_id[:8], on[victim.node_id[:8]]


def test_run_survives_the_loss_of_a_node_with_its_workers_replaced_on_the_other(
        lossy_cluster, tmp_path):
    """A worker node dies mid-run (its raylet and every other Ray process on it SIGKILLed);
    the run replaces its workers on the surviving node and finishes.

    Shape: real clusters run the driver and learner on the head and the workers on
    many-CPU worker nodes (16 CPUs in aws.yaml), so a run that does not fill the cluster
    leaves room on the nodes that survive; here two 4-CPU nodes run two 1-CPU workers
    each. Fractional --worker-cpus would pack more workers on a node than it has cores,
    and a node added after the loss would test the autoscaler's part, not the run's, at
    seconds more per run.

    Sync mode: every update needs a batch from every slot, so the run can only reach its
    budget after the loss if the replacements start and deliver. Ray takes 15 s or more
    to declare the node dead; the replacements must not wait for it on that node."""
    c, pids = lossy_cluster
    run, stderr_path = tmp_path / "run", tmp_path / "stderr"
    with open(stderr_path, "w") as err, open(tmp_path / "stdout", "w+") as out:
        proc = popen_dac("train", "--address", c.address, "--mode", "sync",
                         "--num-workers", "4", "--total-env-steps", "81920",
                         "--log-every-s", "0.1", "--run-dir", str(run), stdout=out, stderr=err)
        try:  # the loss comes after 4 updates of 40, with all 4 workers' batches in each
            lost_node, lost = lose_busiest_node(c, proc, run, stderr_path, 8192, pids)
            proc.wait(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        stdout = out.read()
    stderr = stderr_path.read_text()
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert lost, f"no worker was on the lost node {lost_node}:\n{stderr[-3000:]}"

    # One death per lost worker: the survivors went on, and no replacement died (as one
    # placed on the lost node does once Ray declares the node dead).
    died = sorted(int(w) for w in re.findall(r"worker (\d+) died \(", stderr))
    assert died == sorted(lost), stderr[-3000:]
    started = re.findall(r"worker (\d+)'s replacement started: pid \d+ on node (\w+)", stderr)
    survivors = {n.node_id[:8] for n in c.worker_nodes}  # the lost node is no longer listed
    assert {int(w) for w, _ in started} == lost, stderr[-3000:]
    assert {node for _, node in started} <= survivors, (started, survivors)

    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["worker_restarts"] >= len(lost), summary
    assert summary["env_steps"] >= 81920, summary
    assert summary["dropped_batches"] <= summary["batches"], summary
    steps = logged_env_steps(run)
    assert steps == sorted(set(steps)) and steps[-1] == summary["env_steps"], steps


UNPLACEABLE_SCRIPT = """
import dataclasses, logging, os, sys, threading
import ray
from distributed_ac.pool import ray_pool
from distributed_ac.config.schema import Config
from distributed_ac.config.plan import make_plan

warned = threading.Event()
class Catch(logging.Handler):
    def emit(self, record):
        print(record.getMessage(), flush=True)
        if "not started after" in record.getMessage():
            warned.set()
logging.getLogger("distributed_ac.pool.ray_pool").addHandler(Catch(logging.WARNING))

ray_pool.start_ray(sys.argv[1], False)
ray_pool.REPLACEMENT_WARN_S = 2
pool = ray_pool.RayPool(Config(envs_per_worker=2), make_plan(Config(envs_per_worker=2), 2))
pool.placement()
# From now on a worker needs 2 CPUs, which no node of the cluster has.
pool.cfg = dataclasses.replace(pool.cfg, worker_cpus=2)
pool._cls = ray.remote(ray_pool._PlacedRolloutWorker).options(num_cpus=2)
pool._replace(0, "was told to")
warned.wait(60)
pool.close()
os._exit(0 if warned.is_set() else 3)
"""


def test_a_replacement_the_cluster_has_no_room_for_gets_a_warning_and_does_not_block(cluster):
    """The replacement needs 2 CPUs and no node has 2: _replace returns at once, and a
    warning after REPLACEMENT_WARN_S says what it waits for (the script never ends if
    _replace waits for the actor)."""
    c, _ = cluster
    out = python("-c", UNPLACEABLE_SCRIPT, c.address, timeout=180)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert re.search(r"worker 0's replacement not started after 2 s: it needs 2 CPU and the "
                     r"cluster has [01] of 2 free", out.stdout), out.stdout[-2000:]
    assert "replacement started" not in out.stdout
