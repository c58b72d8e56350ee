"""What one node of a multi-node job reports for a generation, decided from what it knows once its workers are gone.

NodeGeneration.finish (agent.multinode) talks to the job's store: it publishes this node's outcome, gathers the
others' and says it has decided. What it learnt goes in here as facts, and the result comes out, the same on every
node: a stop of the job outranks the failures it caused, a fatal problem and the earliest real failure come before
a lost node or a store that went away.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pai_launch.wire import crossnode
from pai_launch.wire.protocol import GenerationResult, WorkerFailure
from pai_launch.wire.storelink import JobStopped
from pai_launch.wire.storevalues import NodeOutcome

#: A failure seen this long before this node stopped its workers still counts as collateral (clock granularity).
STOP_MARGIN = 0.05


@dataclass(frozen=True)
class NodeFacts:
    """What a node knows of generation `generation` when it decides."""

    generation: int
    log_dir: str
    #: Some worker ran on this node (else nobody waits for its outcome and the store was not asked for the others').
    started: bool
    #: This node's own launcher error.
    error: str | None = None
    #: Every outcome read, this node's among them.
    outcomes: tuple[NodeOutcome, ...] = ()
    #: node -> why it is lost; -1 for nodes that never reported in.
    lost: Mapping[int, str] = field(default_factory=dict)
    stopped_by: JobStopped | None = None
    #: Why the job's store could not be reached, if it could not.
    store_error: str | None = None
    #: The store's address, host:port.
    store: str = ""
    #: A peer's problem that retrying cannot fix, seen before this node's workers ran.
    peer_fatal: str | None = None
    #: How many nodes took part.
    members: int = 1


def local_failures(failures: tuple[WorkerFailure, ...], node: int, host: str,
                   stopped_at: float | None) -> tuple[WorkerFailure, ...]:
    """This node's failures as published: named with the node, and collateral when torch's launcher stopped them,
    when they came once this node had stopped its workers (`stopped_at`, time.time()), or are a launcher's stop after
    the first failure."""
    after = float("inf") if stopped_at is None else stopped_at - STOP_MARGIN
    return tuple(
        WorkerFailure(f.rank, f.returncode, f.pid, f.log_tail, node=node, host=host, at=f.at,
                      collateral=f.collateral or f.at >= after or (index > 0 and
                                                                   crossnode.stopped_by_launcher(f.returncode)))
        for index, f in enumerate(failures)
    )


def stop_among(outcomes: tuple[NodeOutcome, ...]) -> JobStopped | None:
    """The stop a node's pai-launch was making when its workers ended: then they were stopped, not failed."""
    stopping = next((o.stopping for o in outcomes if o.stopping is not None), None)
    return None if stopping is None else JobStopped(*stopping)


def decide(facts: NodeFacts) -> GenerationResult:
    """The generation's result on this node."""
    if not facts.started:
        return _unstarted(facts)
    lost = dict(facts.lost)
    if facts.store_error and facts.stopped_by is None:
        lost[0] = f"(the job's store at {facts.store}) is gone: {facts.store_error}"
    combined = crossnode.combine(list(facts.outcomes), lost)
    if facts.stopped_by is not None:
        return GenerationResult(facts.generation, failures=combined.failures, log_dir=facts.log_dir,
                                stopped_signal=facts.stopped_by.signum, stopped_reason=facts.stopped_by.reason,
                                members=facts.members)
    return GenerationResult(facts.generation, failures=combined.failures, error=combined.error, log_dir=facts.log_dir,
                            fatal=combined.fatal, members=facts.members)


def _unstarted(facts: NodeFacts) -> GenerationResult:
    """No worker ran here (the rendezvous failed, or the job ended before it did): the stop, a peer's fatal problem,
    or why this node's workers never started."""
    if facts.stopped_by is not None:
        return GenerationResult(facts.generation, log_dir=facts.log_dir, stopped_signal=facts.stopped_by.signum,
                                stopped_reason=facts.stopped_by.reason)
    why = facts.error or facts.store_error or "the generation ended before this node's workers started"
    return GenerationResult(facts.generation, error=None if facts.peer_fatal else why, fatal=facts.peer_fatal,
                            log_dir=facts.log_dir)
