"""Everything the supervisor's loop receives, as types: what threads and signal handlers observe, and the
events the state machine decides on.

Observations are put on the loop's inbox by signal handlers, the save-folder watcher and the threads
that wait for child processes. The loop turns them into events, adding what the save folder says
(is the marker there, which switch files changed), and feeds those to machine.step. Every time is
`now`, in time.monotonic() seconds; nothing here does anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pai_launch.core import exitcodes
from pai_launch.wire import failure_causes
from pai_launch.wire.protocol import AgentReady, GenerationRequest, GenerationResult


class Role(Enum):
    """What a plain child process (one without the agent) is for."""

    INIT = "init"
    DATA_PARALLEL = "data_parallel"


# --- observations: put on the inbox by handlers and threads ----------------------------------------
@dataclass(frozen=True)
class SignalReceived:
    signum: int
    now: float


@dataclass(frozen=True)
class SaveWritten:
    """A file in the save folder was created or written to (it may still be mid-write)."""

    name: str
    now: float


@dataclass(frozen=True)
class MarkerAppeared:
    """SAVE/.training_complete was created or written."""

    now: float


@dataclass(frozen=True)
class ProcessExited:
    """The init run or the DataParallel process ended."""

    role: Role
    returncode: int
    log_tail: str
    now: float


@dataclass(frozen=True)
class AgentReported:
    """An agent ended its generation: its result (the agent goes on), or None when it died without one (returncode)."""

    agent_pid: int
    result: GenerationResult | None
    returncode: int | None
    now: float


@dataclass(frozen=True)
class AgentStarted:
    """An agent is ready for its first generation, with warm workers or cold ones (`facts` say which and why); also
    sent when its forkserver was restarted (`restarted_why`) or it went cold later (`went_cold`)."""

    agent_pid: int
    facts: AgentReady
    now: float
    restarted_why: str = ""
    went_cold: bool = False


@dataclass(frozen=True)
class AgentTookRequest:
    """A request that waited for the agent to be ready has gone to it (`taken`), or waits (not `taken`)."""

    agent_pid: int
    taken: bool
    now: float


@dataclass(frozen=True)
class AgentGone:
    """An agent exited between generations (it retired, or was killed): `pending` is the request it never took."""

    agent_pid: int
    returncode: int
    why: str
    pending: GenerationRequest | None
    now: float


@dataclass(frozen=True)
class AgentLeft:
    """The agent exited between generations (it retired, or was killed) still holding the request for generation
    `holding`, which it never took (None: it held none). Whether a new agent runs that generation is the machine's
    call."""

    holding: int | None
    now: float


@dataclass(frozen=True)
class AgentAnswered:
    """The agent answered the supervisor's heartbeat: it is alive and not stopped."""

    agent_pid: int
    now: float


@dataclass(frozen=True)
class AgentJoined:
    """A multi-node agent joined generation `generation` with the job's failure count (node 0's numbers, which this
    node then uses)."""

    agent_pid: int
    generation: int
    failures: int
    now: float


@dataclass(frozen=True)
class ThreadFailed:
    """One of the supervisor's own threads raised: a bug, which ends the run as an internal error."""

    thread: str
    error: str
    traceback: str


# --- events: what the machine decides on -----------------------------------------------------------
@dataclass(frozen=True)
class Began:
    """The loop is ready. Queued behind any signal that arrived during start-up, so such a signal wins."""

    needs_init: bool
    now: float


@dataclass(frozen=True)
class InitExited:
    returncode: int
    log_tail: str = ""
    #: The folder (relative to the working directory) holding this init run's array_dims.csv; None: nowhere.
    wrote_to: str | None = None
    now: float = 0.0


@dataclass(frozen=True)
class SaveFolderAdopted:
    """The lock and state moved into the folder the init run really wrote to."""

    name: str
    now: float


@dataclass(frozen=True)
class AdoptionRefused:
    """The folder the init run wrote to is held by another pai-launch."""

    reason: str
    now: float


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

    def signature(self) -> tuple:
        """What makes two failures 'the same': cause, rank, code and the last line the rank printed."""
        lines = [line.strip() for line in self.log_tail.splitlines() if line.strip()]
        return (self.cause, self.rank, self.returncode, lines[-1] if lines else "", self.detail)

    def cause_signature(self) -> tuple:
        """What makes two failures of a training generation 'the same crash': cause, rank, code and what explains it
        (a known cause's id, else the line that says why the rank died). Lines printed before it (epoch numbers,
        timings) differ from one attempt to the next; the crash does not."""
        cause = failure_causes.known_cause(self.log_tail)
        why = cause.id if cause is not None else failure_causes.explaining_line(self.log_tail)
        return (self.cause, self.rank, self.node, self.returncode, why, self.detail)


@dataclass(frozen=True)
class GenerationEnded:
    #: Failed ranks, root cause first (or one LAUNCHER failure); empty when every worker exited 0.
    failures: tuple[Failure, ...] = ()
    complete: bool = False
    #: switch_*.pt files written or rewritten during the generation.
    progressed: tuple[str, ...] = ()
    now: float = 0.0
    #: Multi-node: the whole job was stopped from some node (the signal, and why).
    stopped: tuple[int, str] | None = None
    #: Multi-node: a problem that retrying cannot fix (the save folder is not shared).
    fatal: str | None = None
    #: A second look at the save folder while a shared file system settles (no process ended).
    recheck: bool = False
    #: Every rank failed, and the generation was started from this switch file (--pai_load_folder's newest).
    all_failed_loading: str | None = None


@dataclass(frozen=True)
class GenerationJoined:
    """This node runs generation `generation`, node 0's number for it, with the job's failure count."""

    generation: int
    now: float
    failures: int = 0


@dataclass(frozen=True)
class GenerationRefused:
    """The generation was not started: the save folder cannot be used (removed, unwritable, full), or the disk its
    workers' output goes to is full (`log_dir`)."""

    reason: str
    now: float
    log_dir: bool = False


@dataclass(frozen=True)
class WorkersWaiting:
    """The generation's request waits for the agent (still starting): no worker runs yet, so no stall is counted."""

    now: float


@dataclass(frozen=True)
class WorkersLaunched:
    """The agent has taken the request that waited for it: the workers start now, and so does the stall clock."""

    now: float


@dataclass(frozen=True)
class SaveActivity:
    """Something was written to the save folder; `training` when it is more than a start-up file."""

    now: float
    training: bool = True


@dataclass(frozen=True)
class SaveFolderLost:
    """The save folder was removed, became unwritable, or its disk is full."""

    reason: str
    now: float


@dataclass(frozen=True)
class JobStoreLost:
    """Node 0's store process (which every node's rendezvous needs) ended before the run did."""

    reason: str
    now: float


@dataclass(frozen=True)
class JobStopSeen:
    """Node 0's store closed with the job's stop flag raised, and this node's agent had not seen it (it was starting,
    or between generations): this node stops as the job did."""

    signum: int
    reason: str
    now: float


@dataclass(frozen=True)
class Tick:
    now: float


@dataclass(frozen=True)
class Resumed:
    """The loop's clock jumped far past its tick (pai-launch was paused: SIGSTOP then SIGCONT, a suspended host), so
    what happened meanwhile may not have reached it yet. `last_write`: the newest write in the save folder, read
    again now (monotonic seconds; None: no file)."""

    now: float
    paused: float
    last_write: float | None = None


Observation = (SignalReceived | SaveWritten | MarkerAppeared | ProcessExited | AgentReported | AgentJoined | AgentStarted
               | AgentTookRequest | AgentGone | AgentAnswered | ThreadFailed)
Event = (Began | InitExited | SaveFolderAdopted | AdoptionRefused | AgentAnswered | AgentLeft | GenerationEnded | GenerationJoined
         | GenerationRefused | JobStopSeen | JobStoreLost | MarkerAppeared | Resumed | SaveActivity | SaveFolderLost
         | SignalReceived | Tick | WorkersLaunched | WorkersWaiting)
