"""The LaunchConfig a generation hands torch's launcher: one node's own, or its part in a multi-node job.

Both rendezvous through c10d (a job's generations through jobrendezvous.py's handler) on an id of their own, let torch
restart nothing (max_restarts=0: pai-launch owns the
restart policy), write every rank's output to files under the generation's log folder and give stopping workers
the run's grace; they differ only in who meets whom, and where.
"""

from __future__ import annotations

import math

from pai_launch.agent import jobrendezvous, torchcompat
from pai_launch.wire import crossnode
from pai_launch.wire.protocol import GenerationRequest

#: With --nnodes MIN:MAX, how long a rendezvous that reached MIN waits for more nodes.
LAST_CALL = 5.0


def single_node(request: GenerationRequest, start_method: str):
    """This node's workers alone, meeting on a port the launcher picks."""
    return torchcompat.launch_config(dict(
        min_nodes=1, max_nodes=1, run_id=request.elastic_run_id, rdzv_endpoint="localhost:0",
        **_shared(request, start_method),
    ))


def multi_node(request: GenerationRequest, generation: int, start_method: str):
    """This node's part of generation `generation`, meeting the other nodes in the job's store (node 0's)."""
    nodes = request.nodes
    assert nodes is not None
    return torchcompat.launch_config(dict(
        min_nodes=nodes.min_nodes, max_nodes=nodes.max_nodes,
        run_id=crossnode.generation_rendezvous_id(nodes.job_id, generation), rdzv_endpoint=f"{nodes.host}:{nodes.port}",
        rdzv_configs={"is_host": False, "join_timeout": max(1, math.ceil(nodes.rdzv_timeout)),
                      "last_call_timeout": int(LAST_CALL)},
        local_addr=nodes.local_addr, **{**_shared(request, start_method), "rdzv_backend": jobrendezvous.register()},
    ))


def grace_s(request: GenerationRequest) -> int:
    """The grace as torch takes its timeouts: whole seconds, at least 1."""
    return max(1, int(request.grace))


def _shared(request: GenerationRequest, start_method: str) -> dict:
    return dict(nproc_per_node=request.nproc, rdzv_backend="c10d", max_restarts=0, monitor_interval=0.1,
                logs_specs=torchcompat.logs_specs(request.log_dir), shutdown_timeout=grace_s(request),
                start_method=start_method)
