"""The events the state machine decides on (machine.step), as types.

The loop makes them from what it observed (observations.py), adding what the save folder says; a signal, the marker
and the agent's heartbeat answer are events as they were observed. Every time is `now`, in time.monotonic()
seconds; nothing here does anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from pai_launch.core.failure import Failure
from pai_launch.core.observations import AgentAnswered, MarkerAppeared, SignalReceived


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


@dataclass(frozen=True)
class AgentLeft:
    """The agent exited between generations (it retired, or was killed) still holding the request for generation
    `holding`, which it never took (None: it held none). Whether a new agent runs that generation is the machine's
    call."""

    holding: int | None
    now: float
    #: The agent that left: its pid, how it exited ("exit code 1", "killed by SIGKILL") and the reason it gave.
    agent_pid: int = 0
    exit: str = ""
    reason: str = ""


@dataclass(frozen=True)
class ProgressRechecked:
    """A second look at the save folder while a shared file system settles (RecheckProgress's answer: no process
    ended, the generation's workers all exited 0 without progress showing)."""

    complete: bool = False
    #: switch_*.pt files that showed up since the generation started.
    progressed: tuple[str, ...] = ()
    now: float = 0.0


class JobStopped(NamedTuple):
    """A stop of the whole job, asked for on some node: the signal it got, and why (said in the log)."""

    signum: int
    reason: str


@dataclass(frozen=True)
class GenerationEnded:
    #: Failed ranks, root cause first (or one LAUNCHER failure); empty when every worker exited 0.
    failures: tuple[Failure, ...] = ()
    complete: bool = False
    #: switch_*.pt files written or rewritten during the generation.
    progressed: tuple[str, ...] = ()
    now: float = 0.0
    #: Multi-node: the whole job was stopped from some node (the signal, and why).
    stopped: JobStopped | None = None
    #: Multi-node: a problem that retrying cannot fix (the save folder is not shared).
    fatal: str | None = None
    #: The switch file the generation was started from (--pai_load_folder's newest), if any: node 0 knows it.
    loaded_from: str | None = None
    #: Dendrites in the model once the generation ended, as status counts them; None: not read (no progress).
    dendrites: int | None = None
    #: The most dendrites the script's PerforatedAI settings allow, and where that comes from; None: unknown.
    max_dendrites: int | None = None
    max_from: str = ""


@dataclass(frozen=True)
class GenerationJoined:
    """This node runs generation `generation`, node 0's number for it, with the job's failure count."""

    generation: int
    now: float
    failures: int = 0


@dataclass(frozen=True)
class GenerationRefused:
    """The generation (or the init run) was not started: the save folder cannot be used (removed, unwritable, its disk
    full), or the disk its workers' output goes to is full (`log_dir`)."""

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


Event = (Began | InitExited | SaveFolderAdopted | AdoptionRefused | AgentAnswered | AgentLeft | GenerationEnded
         | GenerationJoined
         | GenerationRefused | JobStopSeen | JobStoreLost | MarkerAppeared | ProgressRechecked | Resumed | SaveActivity
         | SaveFolderLost
         | SignalReceived | Tick | WorkersLaunched | WorkersWaiting)
