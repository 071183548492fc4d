"""Ray's start-up: importing it (loopback only for an embedded local Ray), starting a
local Ray or joining a cluster, and the CPUs a local one advertises.

pool/ray_pool.py calls these through its load() and start_ray(), which keep the module
for the pool's own code. Ray itself is imported inside import_ray, not at the top: an
embedded local Ray must be told to bind to loopback before Ray is imported.
"""

from __future__ import annotations

import logging
import math
import os
import sys

from distributed_ac.config.schema import Config
from distributed_ac.core.errors import ClusterError

# The Ray pool's logger: a handler on it sees Ray's start-up warnings with the pool's own.
log = logging.getLogger("distributed_ac.pool.ray_pool")


def import_ray(local: bool):
    """Import Ray and return it. `local`: this process will start an embedded Ray.

    Embedded local Ray listens on loopback only. Ray reads this switch when it is
    imported, and then binds every server (GCS, raylet, workers, agents) to 127.0.0.1,
    as it does on a laptop; no other machine can join or reach it. A driver that joins
    a cluster must not set it (the cluster's nodes have to reach it)."""
    # Ray reads these when it is first imported; set after that, they would reach only
    # the processes it starts (a GCS asking for a token its driver does not send).
    if local and "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        # Token authentication, Ray's default for a new local cluster, asked for by
        # name: Ray then keeps it without printing a line about it on every start.
        os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray

    return ray


# By default a new Ray starts one idle worker process per CPU as soon as the driver
# connects. The pool's actors start their own processes at once anyway, so locally the
# spares only compete with TensorFlow's import for the CPUs and delay the first update.
# Applies to a Ray this process starts; a cluster keeps the settings it was started with.
LOCAL_SYSTEM_CONFIG = {"prestart_worker_first_driver": False}


def start(address: str | None, dashboard: bool, num_cpus: int | None = None) -> None:
    """Join a cluster at `address`, or start an embedded local Ray bound to 127.0.0.1."""
    ray = import_ray(local=not address)
    if ray.is_initialized():
        return
    if address:
        join_cluster(address)
        return
    if os.environ.get("RAY_ADDRESS"):
        log.warning("RAY_ADDRESS=%s is not used: without --address, dac train starts its own "
                    "local Ray", os.environ["RAY_ADDRESS"])
    # "local": a new Ray even when RAY_ADDRESS is set or `ray start` runs on this machine;
    # with no address ray.init would join either, and refuse num_cpus with a traceback.
    init_local(ray, address="local", num_cpus=num_cpus or os.cpu_count(),
               include_dashboard=dashboard, dashboard_host="127.0.0.1", configure_logging=False,
               log_to_driver=True, _system_config=LOCAL_SYSTEM_CONFIG)
    node_ip = ray.util.get_node_ip_address()
    if node_ip != "127.0.0.1":  # Ray was imported before ray_pool.make_pool could ask for loopback
        log.warning("local Ray listens on %s, not only on 127.0.0.1", node_ip)


# Ray's own words when its raylet does not register within its fixed 30 s (a loaded
# machine); no setting of Ray's lengthens that wait, so the start is tried again once.
STARTUP_TIMEOUT = "timed out during startup"
STARTUP_TRIES = 2


def init_local(ray, **kwargs) -> None:
    """ray.init(**kwargs), tried again after Ray's start-up timeout; a second timeout is
    one ClusterError line that names the cause and --serial."""
    for attempt in range(1, STARTUP_TRIES + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as e:  # Ray raises a bare Exception for this
            if STARTUP_TIMEOUT not in str(e):
                raise
            ray.shutdown()  # what it started of the node goes before the next try
            if attempt == STARTUP_TRIES:
                raise ClusterError(
                    f"the local Ray did not start, {STARTUP_TRIES} tries: its raylet did not "
                    "register within Ray's 30 s (an overloaded machine); try again when it "
                    "is quieter, or --serial to train without Ray") from None
            log.warning("the local Ray timed out during start-up; starting it again")


def join_cluster(address: str) -> None:
    """ray.init(address=...), with Ray's refusal reported in one line (train() has already
    checked that something answers at a HOST:PORT)."""
    ray = import_ray(local=False)
    try:
        ray.init(address=address, log_to_driver=True, configure_logging=False)
    except (ConnectionError, ValueError) as e:  # auto and no cluster here, or RAY_ADDRESS
        # (which auto defers to) is a dashboard's http:// address; Ray's text spans lines
        raise ClusterError(f"--address {address}: {' '.join(str(e).split())}") from None


def local_num_cpus(cfg: Config) -> int:
    """CPUs the embedded Ray advertises: this machine's, or as many as the workers asked for.

    Ray's CPU count is for scheduling, not a limit: more workers than cores, asked for
    explicitly, share the cores instead of waiting forever for CPUs that never come."""
    cpus = os.cpu_count() or 1
    need = math.ceil(cfg.num_workers * cfg.worker_cpus)
    if need > cpus:
        log.warning("%d workers x %g CPU need %d CPUs on this %d-CPU machine: they share its "
                    "cores", cfg.num_workers, cfg.worker_cpus, need, cpus)
    return max(cpus, need)
