"""`--address`: the Ray cluster to join, checked before anything heavy loads.

Ray itself retries an address where nothing listens for minutes before it gives up, and
takes a dashboard's http:// address for a Ray Client one; both cost a user a long wait
and a traceback. This module imports neither Ray nor TensorFlow.
"""

from __future__ import annotations

import socket

from distributed_ac.core.errors import ClusterError


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """Raise ClusterError (one line) unless `address` is `auto` or a HOST:PORT that
    accepts a TCP connection within `timeout_s`. `auto` is left to ray.init, which
    looks for a cluster started on this machine."""
    if address == "auto":
        return
    if "://" in address and not address.startswith("ray://"):
        raise ClusterError(f"--address {address}: give the cluster's HOST:PORT (the head's GCS, "
                           "port 6379 by default), ray://HOST:PORT, or auto on a node of the "
                           "cluster; an http:// address is the dashboard's, for `ray job submit`")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--address {address}: expected HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ClusterError(f"no Ray cluster answers at {address} ({e.strerror or e}); start one "
                           "with `ray start --head` or `ray up`, or drop --address to train on "
                           "a local Ray") from None
