"""The rendezvous backend a multi-node generation uses: torch's c10d handler, without its per-second poll for
nodes waiting to join.

torch's agent asks its handler every monitor interval how many nodes wait to join the running group, and the c10d
handler answers by reading the whole rendezvous state (about 120 bytes per node) from the store, once a second per
node: N^2 bytes a second from node 0's store, about 120 MB/s at a thousand nodes. In a pai-launch job no node ever
waits to join a running generation (an agent joins only a generation that is open and not yet running; see
crossnode.py), so the answer is always 0, and this handler gives it without the read. Everything else is torch's
handler itself, made by torch's registry from the same parameters.
"""

from __future__ import annotations

#: The name LaunchConfig.rdzv_backend takes for it (registered in the agent process, once).
BACKEND = "pai-c10d"


def _create(params):
    from torch.distributed.elastic.rendezvous import RendezvousParameters, rendezvous_handler_registry

    c10d = RendezvousParameters("c10d", params.endpoint, params.run_id, params.min_nodes, params.max_nodes,
                                params.local_addr, **params.config)
    handler = rendezvous_handler_registry.create_handler(c10d)
    handler.num_nodes_waiting = _none_waiting
    handler.get_backend = _name  # torch's registry checks that a handler is the backend it was asked for
    return handler


def _none_waiting() -> int:
    return 0


def _name() -> str:
    return BACKEND


def register() -> str:
    """The backend's name, registered with torch's handler registry in this process if it was not already."""
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    rendezvous_handler_registry.register(BACKEND, _create)  # the same creator again is no error
    return BACKEND
