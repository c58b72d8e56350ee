"""The pipes between a node's pai-launch and its job store process (store.server): one typed message per line.

TO_STORE is what node 0's pai-launch writes on its store process's stdin: the job's secret first (never on a
command line others can read), then values to set. FROM_STORE is what a store process prints: node 0's store
that it serves (or why it cannot), another node's check that it joined the job (with node 0's facts and the
secret) or why not, and then that node's watch of the store: how the store ended.
"""

from __future__ import annotations

from dataclasses import dataclass

from pai_launch.wire.codec import Protocol
from pai_launch.wire.storevalues import JobFacts, StopFlag

TO_STORE = Protocol("a line to the job's store process")
FROM_STORE = Protocol("the job's store process's line")


@TO_STORE.message("secret")
@dataclass(frozen=True)
class Secret:
    """The job's secret: the store keeps every pai-launch key under it."""

    secret: str


@TO_STORE.message("set")
@dataclass(frozen=True)
class SetValue:
    """Set `key` to `value` (already encoded; the store names and seals it with the secret)."""

    key: str
    value: str


@FROM_STORE.message("serving")
@dataclass(frozen=True)
class Serving:
    """Node 0's store is up at --rdzv-endpoint, served by torch's `backend` server ("libuv" or "legacy")."""

    backend: str = ""


@FROM_STORE.message("refused")
@dataclass(frozen=True)
class Refused:
    """The store cannot be served, or this node cannot join the job: one line naming the problem and the fix."""

    error: str


@FROM_STORE.message("joined")
@dataclass(frozen=True)
class JobJoined:
    """Another node's check passed: node 0's facts and the job's secret (read from the shared save folder)."""

    facts: JobFacts
    secret: str


@FROM_STORE.message("stopped")
@dataclass(frozen=True)
class StopCarried:
    """Node 0's store closed with the job's stop flag raised, which this node's agent had not seen."""

    flag: StopFlag


@FROM_STORE.message("closed")
@dataclass(frozen=True)
class StoreClosed:
    """Node 0's store closed as it should (its pai-launch is done)."""


@FROM_STORE.message("lost")
@dataclass(frozen=True)
class StoreGone:
    """The store went away without closing (node 0's pai-launch or machine gone): why."""

    why: str
