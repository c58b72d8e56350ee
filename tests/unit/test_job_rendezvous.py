"""The rendezvous handler a job's generations use is torch's own c10d handler, made from the same parameters,
except that asking it for nodes waiting to join costs the store nothing: torch's agent asks every monitor interval,
and torch's answer reads the whole rendezvous state (O(nodes) bytes) once a second on every node."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest

from pai_launch.agent import jobrendezvous

pytestmark = pytest.mark.timeout(60)


def test_the_jobs_handler_is_torchs_c10d_handler_that_never_reads_the_state_for_waiting_nodes():
    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous import RendezvousParameters, rendezvous_handler_registry

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    name = jobrendezvous.register()
    assert jobrendezvous.register() == name == "pai-c10d", "registering again (each generation) is no error"
    params = RendezvousParameters(name, f"127.0.0.1:{port}", "job-g1", 2, 2, is_host=False, timeout=30)
    handler = rendezvous_handler_registry.create_handler(params)
    assert handler.get_backend() == "pai-c10d" and handler.get_run_id() == "job-g1"
    keys = store.num_keys()
    assert handler.num_nodes_waiting() == 0
    assert store.num_keys() == keys
    torch_own = rendezvous_handler_registry.create_handler(
        RendezvousParameters("c10d", f"127.0.0.1:{port}", "job-g1", 2, 2, is_host=False, timeout=30))
    assert type(torch_own) is type(handler), "the same class as torch's, with the same settings"
    ours, theirs = handler._settings, torch_own._settings
    assert vars(ours.timeout) == vars(theirs.timeout)
    assert (ours.run_id, ours.min_nodes, ours.max_nodes, ours.keep_alive_interval) == \
        (theirs.run_id, theirs.min_nodes, theirs.max_nodes, theirs.keep_alive_interval)
