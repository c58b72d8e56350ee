"""torch's exit barrier left out: every node's generation ends at pai-launch's exchange of outcomes instead.

torch's agent enters its exit barrier only when its own workers succeeded, and the barrier counts only agents that
entered it: when a rank on one node fails after the ranks of another node exited 0 (what a gloo or NCCL abort at
exit does), the failed node's agent never arrives, and the other node's agent waits in the barrier's store wait, a
C++ call no Python signal interrupts, for exit_barrier_timeout (300 s, which LaunchConfig does not carry). The
barrier keeps an agent that hosts the rendezvous store alive while the others still read it. No generation's agent
hosts the job's store (is_host=False), and every node, failed or not, publishes its outcome there and reads the
others' (agent.multinode): that exchange already is the barrier, and torch's adds only the wait.
"""

from __future__ import annotations


def _no_barrier(self) -> None:
    """pai-launch's exchange of outcomes is the generation's exit barrier (see the module)."""


_no_barrier._pai_launch_skipped = True  # type: ignore[attr-defined]


def skip(cls: type) -> None:
    """Make `cls._exit_barrier` return at once."""
    cls._exit_barrier = _no_barrier


def apply() -> None:
    """Leave torch's exit barrier out of every generation this process launches (process-wide: the agent only)."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    skip(LocalElasticAgent)
