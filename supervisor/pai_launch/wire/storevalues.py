"""The typed values the job's nodes leave in its store for each other (wire.codec messages of STORE), each read back
as the type its key names (crossnode.ValueKey): what the job is, the generation node 0 opened, the stop flag, a
generation's members and each node's outcome. Pure, stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pai_launch.wire import codec
from pai_launch.wire.protocol import WorkerFailure

#: Every typed value in the store; the other keys (crossnode) are flags and counters whose presence is what counts.
STORE = codec.Protocol("a job store value")


@STORE.message("info")
@dataclass(frozen=True)
class StoreInfo:
    """Public: that this is a pai-launch job's store and, once node 0 holds the save folder, the secret's digest
    and the file (in the save folder) that holds it."""

    digest: str = ""
    secret_file: str = ""


@STORE.message("facts")
@dataclass(frozen=True)
class JobFacts:
    """What node 0 says of the job, under the secret: a node trusts these, not StoreInfo's."""

    run_id: str
    job_id: str
    #: The command every node must run the same (coordination.job_fingerprint).
    fingerprint: dict[str, Any]
    min_nodes: int
    max_nodes: int


@STORE.message("opened")
@dataclass(frozen=True)
class OpenedGeneration:
    """The generation node 0 opened, with the job's failure count (the budget used), which every node takes."""

    generation: int
    failures: int


@STORE.message("stop")
@dataclass(frozen=True)
class StopFlag:
    """Some node's pai-launch was asked to stop the job (signal number, why)."""

    signal: int
    reason: str



@STORE.message("member")
@dataclass(frozen=True)
class Member:
    """A node that runs workers in this generation."""

    node: int
    host: str
    group_rank: int
    ranks: tuple[int, ...]


@STORE.message("outcome")
@dataclass(frozen=True)
class NodeOutcome:
    """One node's end of a generation, as published in the store."""

    node: int
    host: str
    failures: tuple[WorkerFailure, ...] = ()
    error: str | None = None
    fatal: str | None = None
    #: This node's pai-launch was stopping the job (signal number, why) when its workers ended.
    stopping: tuple[int, str] | None = None
    #: Published by the node that watched this one: it stopped beating (why). Whichever outcome for a node is
    #: published first stands (storelink.publish), so every node reads the same.
    lost: str | None = None
