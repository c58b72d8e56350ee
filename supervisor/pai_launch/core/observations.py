"""What the supervisor's loop observes, as types: put on its inbox by signal handlers, the save-folder watcher and
the threads that wait for child processes.

The loop turns these into the machine's events (events.py), adding what the save folder says (is the marker there,
which switch files changed); a signal, the marker and the agent's heartbeat answer go on unchanged. Every time is
`now`, in time.monotonic() seconds; nothing here does anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pai_launch.wire.protocol import AgentReady, GenerationRequest, GenerationResult


class Role(Enum):
    """What a plain child process (one without the agent) is for."""

    INIT = "init"
    DATA_PARALLEL = "data_parallel"


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
class RestructureRecorded:
    """Rank 0 left a record of a restructure inside the running workers (--restructure in-process)."""

    path: str
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


Observation = (SignalReceived | SaveWritten | RestructureRecorded | MarkerAppeared | ProcessExited | AgentReported
               | AgentJoined | AgentStarted
               | AgentTookRequest | AgentGone | AgentAnswered | ThreadFailed)
