"""What starts each relayed line of a worker (agent.relay): pai-launch's label, or torchrun's
--log-line-prefix-template rendered for the worker (wire.lineprefix) on the node it runs on."""

from __future__ import annotations

import socket

from pai_launch.agent.workers import WorkerWatch
from pai_launch.wire import lineprefix
from pai_launch.wire.protocol import GenerationRequest


def head(local_rank: int, rank: int | None, node: int | None, template: str | None, hostname: str) -> str:
    """One worker's head, given its global rank (None: not known yet) and this node's rank (None: one node).
    Pure. Without a template: `[rank3]: `, in a multi-node job `[rank3 node1]: ` (`[local rank 1 node1]: ` while the
    global rank is not known); with one, the template as torch renders it, `?` for a rank not known yet."""
    if template is not None:
        return lineprefix.render(template, rank=lineprefix.UNKNOWN_RANK if rank is None else rank,
                                 local_rank=local_rank, hostname=hostname)
    if node is None:
        return f"[rank{local_rank}]: "
    return f"[rank{rank} node{node}]: " if rank is not None else f"[local rank {local_rank} node{node}]: "


class RankHeads:
    """A generation's heads by local rank. The global rank is the group's first rank plus the local rank (torch
    numbers ranks node by node); one node's group is known without the watch."""

    def __init__(self, request: GenerationRequest, hostname: str | None = None) -> None:
        self.nproc = request.nproc
        self.node = None if request.nodes is None else request.nodes.node_rank
        self.template = request.line_prefix_template
        self.hostname = socket.gethostname() if hostname is None else hostname
        self.watch: WorkerWatch | None = None

    def rank(self, local_rank: int) -> int | None:
        if self.node is None:
            return local_rank
        group = self.watch.group if self.watch is not None else None
        return None if group is None else group[0] * self.nproc + local_rank

    def __call__(self, local_rank: int) -> str:
        return head(local_rank, self.rank(local_rank), self.node, self.template, self.hostname)
