"""Which machines a run spans, from torchrun's options: --nnodes N or MIN:MAX, --node-rank, --rdzv-endpoint,
--rdzv-id, --rdzv-timeout. Pure parsing and checks; no sockets.

Node 0 serves the job's rendezvous store (torch's TCPStore) at the endpoint for the whole run, so every
generation's c10d rendezvous, and the nodes' agreement on how it ended, live in one store that no
generation's agent owns (a store that dies with an agent is what breaks torchrun's restarts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pai_launch.placement import seconds
from pai_launch.wire.errors import LaunchError

DEFAULT_PORT = 29400
DEFAULT_RDZV_TIMEOUT = 900.0
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-_]*[A-Za-z0-9])?$")


class NodesError(LaunchError, ValueError):
    """A multi-node option that cannot be right; the message names the fix."""


@dataclass(frozen=True)
class Nodes:
    """This node's place in the job. One node (the default) keeps the single-machine behaviour."""

    min_nodes: int = 1
    max_nodes: int = 1
    node_rank: int = 0
    host: str = "localhost"
    port: int = DEFAULT_PORT
    #: The job's rendezvous id (--rdzv-id, a Slurm job id); None: node 0's run id.
    rdzv_id: str | None = None
    rdzv_timeout: float = DEFAULT_RDZV_TIMEOUT
    #: The address other nodes reach this one's workers at (torchrun's --local-addr); None: torch's choice.
    local_addr: str | None = None
    #: The job's secret (jobsecret.py), once node 0 made it or this node read it from the save folder; never shown.
    secret: str = field(default="", repr=False, compare=False)

    @property
    def multi(self) -> bool:
        return self.max_nodes > 1

    @property
    def coordinator(self) -> bool:
        """Node 0: runs the init run, serves the store and writes state.json."""
        return self.node_rank == 0

    @property
    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def count(self) -> str:
        """The node count as --nnodes says it: N, or MIN:MAX."""
        return str(self.max_nodes) if self.min_nodes == self.max_nodes else f"{self.min_nodes}:{self.max_nodes}"

    @property
    def others(self) -> str:
        """The nodes a generation waits for here: every other one, as each generation is a fresh rendezvous."""
        return ", ".join(str(node) for node in range(self.max_nodes) if node != self.node_rank)

    def describe(self) -> str:
        return f"node {self.node_rank} of {self.count}, rendezvous store at {self.endpoint}"


def parse_nnodes(text: str) -> tuple[int, int]:
    """'2' -> (2, 2); '1:4' -> (1, 4), as torchrun reads --nnodes."""
    parts = text.split(":")
    if len(parts) > 2 or not all(part.strip().isdigit() for part in parts):
        raise NodesError(f"--nnodes {text!r} is not N or MIN:MAX: give e.g. --nnodes 2 or --nnodes 1:4")
    low, high = (int(parts[0]), int(parts[-1]))
    if low < 1 or high < low:
        raise NodesError(f"--nnodes {text!r}: need 1 <= MIN <= MAX, e.g. --nnodes 2:4")
    return low, high


def parse_endpoint(text: str) -> tuple[str, int]:
    """'HOST[:PORT]' or '[IPv6]:PORT' -> (host, port); the port defaults to 29400, like torchrun's c10d."""
    text = text.strip()
    port_text: str | None = None
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise NodesError(f"--rdzv-endpoint {text!r} is malformed: give HOST:PORT, e.g. node1:29400 or [::1]:29400")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host = text
    if not host or (not text.startswith("[") and not _HOST.match(host)):
        raise NodesError(f"--rdzv-endpoint {text!r} has no valid host: give HOST:PORT, e.g. node1:29400")
    if port_text is None:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise NodesError(f"--rdzv-endpoint {text!r}: the port must be 1-65535, e.g. {host}:29400")
    return host, int(port_text)


def check(nodes: Nodes, *, endpoint_given: bool) -> None:
    """The combination makes sense (NodesError names the first problem)."""
    if not 0 <= nodes.node_rank < nodes.max_nodes:
        raise NodesError(f"--node-rank {nodes.node_rank} is outside --nnodes {nodes.max_nodes}: give "
                         f"0..{nodes.max_nodes - 1}")
    timeout_problem = seconds.problem("--rdzv-timeout", nodes.rdzv_timeout)
    if timeout_problem:
        raise NodesError(timeout_problem)
    if nodes.multi and not endpoint_given:
        raise NodesError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT: node 0's address, the same on every node")
    if nodes.rdzv_id is not None and not re.match(r"^[A-Za-z0-9._\-]+$", nodes.rdzv_id):
        raise NodesError(f"--rdzv-id {nodes.rdzv_id!r}: use letters, digits, '.', '_' and '-' only")
