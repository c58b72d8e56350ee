"""Helpers for multi-node tests on one machine: several pai-launch processes, one per "node", on loopback.

They share the scene's working directory (the shared save folder) and TMPDIR; node 0 serves the job's
store on a free port of 127.0.0.1.
"""

from __future__ import annotations

import socket

from tests.helpers import Launch


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; released at once, so a test uses it right away)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_args(rank: int, port: int, nnodes: str = "2") -> list[str]:
    return ["--nnodes", nnodes, "--node-rank", str(rank), "--rdzv-endpoint", f"127.0.0.1:{port}"]


def start_node(scene, rank: int, port: int, *pai_args: str, nnodes: str = "2", name: str | None = None,
               **kwargs) -> Launch:
    return scene.start(*node_args(rank, port, nnodes), *pai_args, name=name or f"node{rank}", **kwargs)


def start_job(scene, count: int, *pai_args: str, nnodes: str | None = None, port: int | None = None,
              **kwargs) -> tuple[list[Launch], int]:
    """`count` nodes (node 0 first, so its store is up soonest); (their launches, the store's port)."""
    port = port or free_port()
    nodes = [start_node(scene, rank, port, *pai_args, nnodes=nnodes or str(count), **kwargs) for rank in range(count)]
    return nodes, port


def wait_all(nodes: list[Launch], timeout: float) -> list[int]:
    return [node.wait(timeout) for node in nodes]


def summaries(nodes: list[Launch]) -> str:
    return "\n\n".join(f"--- node {rank} ---\n{node.log_summary()}" for rank, node in enumerate(nodes))
