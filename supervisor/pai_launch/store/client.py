"""The agent side's client of the job's store (node 0's torch TCPStore): connecting to it, and raising the job's
stop flag in it. Runs in the agent and store processes only: the supervisor never imports torch."""

from __future__ import annotations

import socket
import time

from pai_launch.wire import crossnode, storevalues
from pai_launch.wire.storelink import StoreLink


def wait_listening(host: str, port: int, timeout: float) -> float:
    """Wait until something accepts connections at host:port; the seconds left of `timeout`. TimeoutError when nothing
    did in time. torch's own client retries past its timeout (a 10 s timeout gave up after 16 s), so the wait for node
    0 is ours, and torch's client only connects to a store that is there."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"nothing accepted a connection at {host}:{port}")
        try:
            socket.create_connection((host, port), timeout=min(1.0, left)).close()
            return max(1.0, deadline - time.monotonic())
        except OSError:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def connect(host: str, port: int, timeout: float):
    """A client of node 0's store, within `timeout`. Once connected, no single call may block longer than LOST_AFTER
    (node 0's machine gone without a reset must not hold a node for many minutes)."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    left = wait_listening(host, port, timeout)
    store = TCPStore(host, port, is_master=False, timeout=timedelta(seconds=left), wait_for_workers=False)
    store.set_timeout(timedelta(seconds=crossnode.LOST_AFTER))
    return store


def raise_stop_flag(stop) -> None:
    """Tell every node the job stops (their agents poll the flag); a short connect: node 0 may be gone."""
    store = StoreLink(connect(stop.host, stop.port, 5.0), -1, stop.secret)
    if store.get(crossnode.STOP) is None:
        store.put(crossnode.STOP, storevalues.StopFlag(stop.signum, stop.reason))
