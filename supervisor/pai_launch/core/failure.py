"""A generation's failure: its cause, how it reads, the exit code it ends a run with, and when two are the same.

Carried on GenerationEnded; judged by outcomes.py and repeats.py, told by reports.py. Pure values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pai_launch.core import exitcodes
from pai_launch.wire import failure_causes, failure_phase


class Cause(Enum):
    """Why a generation failed."""

    #: A worker exited non-zero or was killed by a signal.
    WORKER = "worker"
    #: pai-launch's agent died or torch's launcher failed (rendezvous and the like): no worker result.
    LAUNCHER = "launcher"
    #: No write to the save folder for --stall-timeout seconds; the workers were stopped.
    STALL = "stall"
    #: Every switch file the generation wrote fails the checkpoint check: nothing to resume from, so no progress.
    CHECKPOINT = "checkpoint"
    #: pai-launch's own agent failed (it stopped answering, its forkserver died): the next generation gets new ones.
    AGENT = "agent"


@dataclass(frozen=True)
class Failure:
    cause: Cause
    #: The failed rank (WORKER only).
    rank: int | None = None
    #: Popen-style (negative N for signal N); WORKER only.
    returncode: int | None = None
    log_tail: str = ""
    #: What went wrong, for LAUNCHER, STALL and AGENT.
    detail: str = ""
    #: Multi-node: the node (--node-rank) and host the failed rank ran on.
    node: int | None = None
    host: str = ""

    @classmethod
    def worker(cls, rank: int, returncode: int, log_tail: str = "", node: int | None = None, host: str = "") -> Failure:
        return cls(Cause.WORKER, rank=rank, returncode=returncode, log_tail=log_tail, node=node, host=host)

    @property
    def where(self) -> str:
        """' on node 1 (gpu07)' in a multi-node job, else nothing."""
        if self.node is None:
            return ""
        return f" on node {self.node}" + (f" ({self.host})" if self.host else "")

    @classmethod
    def launcher(cls, detail: str) -> Failure:
        return cls(Cause.LAUNCHER, detail=detail)

    @classmethod
    def stall(cls, detail: str) -> Failure:
        return cls(Cause.STALL, detail=detail)

    @classmethod
    def checkpoint(cls, detail: str) -> Failure:
        return cls(Cause.CHECKPOINT, detail=detail)

    @classmethod
    def agent(cls, detail: str) -> Failure:
        return cls(Cause.AGENT, detail=detail)

    def describe(self) -> str:
        if self.cause is Cause.WORKER:
            return (f"rank {self.rank}{self.where} failed with {exitcodes.describe_returncode(self.returncode or 0)}"
                    + failure_causes.summary(self.log_tail))
        if self.cause is Cause.LAUNCHER:
            return f"the launcher failed: {self.detail}"
        return self.detail

    def exit_code(self) -> int:
        """The code a run ends with when this failure ends it: the worker's own, else the launcher's."""
        if self.cause is Cause.WORKER and self.returncode is not None:
            return exitcodes.from_returncode(self.returncode)
        if self.cause is Cause.CHECKPOINT:
            return exitcodes.BUDGET_EXHAUSTED
        return exitcodes.LAUNCHER_ERROR

    def phase(self) -> failure_phase.Phase:
        """Where in its life the rank failed, as its output says (UNKNOWN for a failure that is not a rank's)."""
        return failure_phase.phase_of(self.log_tail) if self.cause is Cause.WORKER else failure_phase.Phase.UNKNOWN

    def unloadable(self) -> str | None:
        """The line of its output proving that the file it was loading cannot be loaded; None without such proof."""
        return failure_phase.unloadable_line(self.log_tail) if self.cause is Cause.WORKER else None

    def transient(self) -> bool:
        """Its output names a cause that a retry can get past (a race, a slow peer, a GPU still held)."""
        cause = failure_causes.known_cause(self.log_tail) if self.cause is Cause.WORKER else None
        return cause is not None and cause.transient

    def signature(self) -> tuple:
        """What makes two failures 'the same': cause, rank, code and the last line the rank printed."""
        lines = [line.strip() for line in self.log_tail.splitlines() if line.strip()]
        return (self.cause, self.rank, self.returncode, lines[-1] if lines else "", self.detail)

    def cause_signature(self) -> tuple:
        """What makes two failures of a training generation 'the same crash': cause, rank, code and what explains it
        (a known cause's id, else the line that says why the rank died). Lines printed before it (epoch numbers,
        timings) differ from one attempt to the next; the crash does not."""
        cause = failure_causes.known_cause(self.log_tail)
        if cause is not None:  # every rank runs the same script: which one died of it first is timing
            return (self.cause, self.returncode, cause.id, self.detail)
        return (self.cause, self.rank, self.node, self.returncode, failure_causes.explaining_line(self.log_tail),
                self.detail)
