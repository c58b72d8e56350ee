"""The narrow boundary between the supervisor and the agent process: a generation request in, a result out.

Both sides exchange one JSON object per line over pipes. This module imports nothing heavy, so the
supervisor can use it without torch and the agent without typer or watchdog.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GenerationRequest:
    """Start `nproc` workers running `python ARGS` under a fresh elastic rendezvous."""

    generation: int
    nproc: int
    python: str
    args: tuple[str, ...]
    env: dict[str, str]
    log_dir: str
    grace: float
    elastic_run_id: str
    #: Set for a multi-node job: where the job's store is and this node's place in it.
    nodes: NodeRequest | None = None

    def to_line(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes) -> GenerationRequest:
        data = json.loads(line)
        data["args"] = tuple(data["args"])
        if data.get("nodes") is not None:
            data["nodes"] = NodeRequest(**data["nodes"])
        return cls(**data)


@dataclass(frozen=True)
class NodeRequest:
    """A generation of a multi-node job: the rendezvous runs in node 0's store at host:port."""

    node_rank: int
    min_nodes: int
    max_nodes: int
    host: str
    port: int
    rdzv_timeout: float
    #: The job's rendezvous id; each generation rendezvouses as JOB-gN.
    job_id: str
    #: The shared save folder, where node 0's init run must have written (checked by the other nodes).
    save_dir: str
    #: How long a file written on another node may take to show up here (a shared file system's caching).
    fs_settle: float
    local_addr: str | None = None
    #: This node's failure count (node 0's is the job's: the others take it from node 0).
    failures: int = 0
    #: The job's secret (jobsecret.py): every pai-launch key in the store lives under it. Sent over the pipe only.
    secret: str = ""


@dataclass(frozen=True)
class StopJob:
    """Sent to an agent (running a generation or not): this node's pai-launch is stopping, so the whole job stops.

    The agent sets the job's stop flag in node 0's store at host:port; every node's agent sees it.
    """

    signum: int
    reason: str
    host: str
    port: int
    secret: str = ""

    def to_line(self) -> bytes:
        return (json.dumps({"stop": asdict(self)}) + "\n").encode()


def ping_line(seq: int) -> bytes:
    """The supervisor's heartbeat: the agent's request reader answers it at once with pong_line(seq)."""
    return (json.dumps({"ping": seq}) + "\n").encode()


def pong_line(seq: int) -> bytes:
    return (json.dumps({"pong": seq}) + "\n").encode()


def cancel_line(generation: int) -> bytes:
    """The run is stopping: generation `generation`, if its workers are not started yet, must never start them."""
    return (json.dumps({"cancel": generation}) + "\n").encode()


def joined_line(generation: int, failures: int) -> bytes:
    """The agent's first line in a multi-node job: the generation it really joined and the job's failure count, as
    node 0 has them."""
    return (json.dumps({"joined": generation, "failures": failures}) + "\n").encode()


@dataclass(frozen=True)
class WorkerFailure:
    """One rank that did not exit 0: `returncode` is Popen-style (negative N for signal N)."""

    rank: int
    returncode: int
    pid: int
    log_tail: str = ""
    #: Which node it ran on (--node-rank) and that node's host name.
    node: int = 0
    host: str = ""
    #: When its exit was seen (time.time(), comparable across nodes).
    at: float = 0.0
    #: Stopped by the launcher because something else failed first.
    collateral: bool = False


@dataclass(frozen=True)
class GenerationResult:
    """How a generation ended: no failures means every worker exited 0."""

    generation: int
    failures: tuple[WorkerFailure, ...] = ()
    error: str | None = None
    log_dir: str = ""
    #: Multi-node: the job was stopped by a signal to some node's pai-launch (signal number, why).
    stopped_signal: int | None = None
    stopped_reason: str = ""
    #: Multi-node: a problem retrying cannot fix (the save folder is not shared).
    fatal: str | None = None
    #: Multi-node: the nodes that ran this generation.
    members: int = 1
    #: pai-launch's own machinery failed under the workers (the warm workers' forkserver died): what to say instead
    #: of the ranks' exits, which are its consequence.
    fault: str | None = None
    #: The generation was cancelled (the run is stopping) before any worker was started.
    cancelled: bool = False

    def to_line(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode()

    @classmethod
    def from_line(cls, line: bytes) -> GenerationResult:
        data = json.loads(line)
        data["failures"] = tuple(WorkerFailure(**item) for item in data["failures"])
        return cls(**data)
