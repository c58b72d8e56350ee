"""The agent side's client of the job's store (node 0's torch TCPStore): connecting to it, and raising the job's
stop flag in it. Runs in the agent and store processes only: the supervisor never imports torch."""

from __future__ import annotations

from pai_launch.wire import crossnode, storevalues
from pai_launch.wire.storelink import StoreLink


def connect(host: str, port: int, timeout: float):
    """A client of node 0's store; torch retries the connection until `timeout`. Once connected, no single call may
    block longer than LOST_AFTER (node 0's machine gone without a reset must not hold a node for many minutes)."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    store = TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout), wait_for_workers=False)
    store.set_timeout(timedelta(seconds=crossnode.LOST_AFTER))
    return store


def raise_stop_flag(stop) -> None:
    """Tell every node the job stops (their agents poll the flag); a short connect: node 0 may be gone."""
    store = StoreLink(connect(stop.host, stop.port, 5.0), -1, stop.secret)
    if store.get(crossnode.STOP) is None:
        store.put(crossnode.STOP, storevalues.StopFlag(stop.signum, stop.reason))
