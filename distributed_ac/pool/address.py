"""`--address`: the Ray cluster to join, checked before anything heavy loads.

Ray itself retries an address where nothing listens for minutes before it gives up, and
takes a dashboard's http:// address for a Ray Client one; both cost a user a long wait
and a traceback. And Ray's `auto` falls back to any Ray it finds running on the machine
(a scan of its processes), so beside another job's local Ray it joins that job's
cluster, or retries its GCS for minutes. Here `auto` means the cluster the user started
with `ray start`, named by the address file that command writes, and is resolved to
that HOST:PORT before Ray sees it. This module imports neither Ray nor TensorFlow.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from distributed_ac.core.errors import ClusterError


def ray_address_file() -> Path:
    """Where `ray start` records the address of the cluster it started on this machine
    (Ray's get_ray_address_file: under RAY_TMPDIR, else TMPDIR on Linux, else /tmp)."""
    root = os.environ.get("RAY_TMPDIR") or (
        os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None) or "/tmp"
    return Path(root) / "ray" / "ray_current_cluster"


def check_address(address: str, timeout_s: float = 5.0) -> str:
    """The address to hand ray.init: `address` itself, or for `auto` the HOST:PORT of the
    cluster RAY_ADDRESS or `ray start`'s address file names. ClusterError (one line)
    unless that is a HOST:PORT that accepts a TCP connection within `timeout_s`."""
    if address != "auto":
        _check_reachable(address, address, timeout_s)
        return address
    where = "RAY_ADDRESS"
    found = os.environ.get("RAY_ADDRESS", "").strip()
    if found == "auto":  # says no more than --address auto itself
        found = ""
    if not found:  # RAY_ADDRESS is the user's (or their Ray job's) own choice; else ray start's
        where = str(ray_address_file())
        try:
            found = ray_address_file().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            found = ""
        if not found:
            raise ClusterError(f"--address auto: no Ray cluster was started on this machine "
                               f"(no address in {where}, which `ray start --head` writes); "
                               "start one, give the cluster's HOST:PORT, or drop --address "
                               "to train on a local Ray")
    _check_reachable(found, f"auto ({where}: {found})", timeout_s)
    return found


def _check_reachable(address: str, flag: str, timeout_s: float) -> None:
    if "://" in address and not address.startswith("ray://"):
        raise ClusterError(f"--address {flag}: give the cluster's HOST:PORT (the head's GCS, "
                           "port 6379 by default), ray://HOST:PORT, or auto on a node of the "
                           "cluster; an http:// address is the dashboard's, for `ray job submit`")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--address {flag}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ClusterError(f"no Ray cluster answers at {flag} ({e.strerror or e}); start one "
                           "with `ray start --head` or `ray up`, or drop --address to train on "
                           "a local Ray") from None
