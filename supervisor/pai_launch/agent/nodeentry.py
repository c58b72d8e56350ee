"""Taking this node's place in a multi-node generation, in the agent process, before torch's rendezvous: the job's
store reached, the generation node 0 opened entered (with the job's failure count), and node 0's init run output seen
through the save folder, which every node must share. Any of these failing is this generation's result at once.
"""

from __future__ import annotations

import os
import socket

from pai_launch.savefmt import savedir
from pai_launch.store.client import connect
from pai_launch.wire import crossnode
from pai_launch.wire.protocol import GenerationRequest, GenerationResult
from pai_launch.wire.storelink import JobStopped, StoreLink, StoreLost
from pai_launch.wire.storevalues import NodeOutcome


def enter(request: GenerationRequest, joined) -> tuple[StoreLink, int] | GenerationResult:
    """Connect to the job's store and take this node's generation; a GenerationResult when that fails."""
    nodes = request.nodes
    assert nodes is not None
    where = f"{nodes.host}:{nodes.port}"
    try:
        link = StoreLink(connect(nodes.host, nodes.port, nodes.rdzv_timeout), nodes.node_rank, nodes.secret)
    except Exception as exc:  # noqa: BLE001 - torch's connect timeout
        detail = crossnode.one_line(exc)
        return GenerationResult(request.generation, error=f"cannot reach the job's store at {where} within "
                                f"{nodes.rdzv_timeout:g} s (node 0's pai-launch serves it): {detail}",
                                log_dir=request.log_dir)
    try:
        generation, failures = link.enter(request.generation, nodes.node_rank == 0, nodes.failures)
    except JobStopped as stop:
        return GenerationResult(request.generation, stopped_signal=stop.signum, stopped_reason=stop.reason,
                                log_dir=request.log_dir)
    except StoreLost as exc:
        return GenerationResult(request.generation, error=f"the job's store at {where} went away: {exc}",
                                log_dir=request.log_dir)
    joined(generation, failures)
    if nodes.node_rank != 0 and not savedir.wait_shown(os.path.join(nodes.save_dir, savedir.INIT_OUTPUT),
                                                       nodes.fs_settle):
        fatal = (f"node 0 started generation {generation}, but {nodes.save_dir}/{savedir.INIT_OUTPUT} (its init run's "
                 "output) is not "
                 f"visible on this node after {nodes.fs_settle:g} s: the save folder must be on a file system every "
                 "node shares")
        outcome = NodeOutcome(nodes.node_rank, socket.gethostname(), fatal=fatal)
        try:
            link.publish(generation, outcome)
        except StoreLost:
            pass
        return GenerationResult(generation, fatal=fatal, log_dir=request.log_dir)
    return link, generation

