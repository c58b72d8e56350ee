"""What the state machine asks the runner to do: commands, named in the imperative."""

from __future__ import annotations

from dataclasses import dataclass

from pai_launch.core.events import GenerationEnded, InitExited


@dataclass(frozen=True)
class StartInit:
    """Start the single-process init run (--perforate_model_parallel)."""


@dataclass(frozen=True)
class AdoptSaveFolder:
    """The init run wrote to `name`, not to the save folder: make `name` the save folder."""

    name: str


@dataclass(frozen=True)
class StartGeneration:
    generation: int
    #: A switch file the last attempt proved unloadable: moved aside first, so the one before is resumed.
    quarantine: str | None = None
    #: The proof, for the log.
    quarantine_why: str = ""


@dataclass(frozen=True)
class PrepareAgent:
    """Start the next generation's agent ahead of time (it imports torch while the current one runs)."""


@dataclass(frozen=True)
class ReplaceAgent:
    """Start a new agent and hand it the request for `generation` that the last one left without taking; the one
    that left (its pid, how it exited, why) is named in the log."""

    generation: int
    replaced_pid: int = 0
    exit: str = ""
    reason: str = ""


@dataclass(frozen=True)
class SignalRun:
    """Send `signum` to every process of the run (workers or the init run), not to the agent.

    `only_new`: only to processes that have not had it yet (workers that started after the first send).
    """

    signum: int
    only_new: bool = False


@dataclass(frozen=True)
class KillRun:
    """SIGKILL every process pai-launch started."""


@dataclass(frozen=True)
class ScheduleRetry:
    """Informative: the failed generation is retried after `delay` seconds."""

    delay: float
    failures: int
    reason: str


@dataclass(frozen=True)
class ReportStall:
    """Informative: no save-folder write for `idle` seconds; workers get STALL_SIGNAL next."""

    idle: float


@dataclass(frozen=True)
class ReportRunaway:
    """Informative: the model has more dendrites than the script's settings allow (`most`): PerforatedAI keeps
    restructuring past its own maximum (a capacity test left on, a setting changed after perforate_model)."""

    dendrites: int
    most: int
    #: Where `most` comes from (the script's max_dendrites, or PerforatedAI's capacity test).
    source: str = ""


@dataclass(frozen=True)
class ReportAgentHung:
    """Informative: the agent has not answered for `silent` seconds; its workers are stopped, then it is killed."""

    silent: float


@dataclass(frozen=True)
class ReportInitEnd:
    """Informative: the init run ended (`event`) `duration` seconds after it started; a failure's output tail is said
    unless a stop was asked for (`stopped_by`)."""

    event: InitExited
    duration: float
    stopped_by: str | None


@dataclass(frozen=True)
class ReportGenerationEnd:
    """Informative: a generation ended (`event`), said as ended, failed or stopped with the run's facts as they stood
    when it ended: what it is judged by is core.reports.generation_end."""

    event: GenerationEnded
    generation: int
    duration: float
    #: The stop that was asked for (a signal's name, the job's stop), with its reason; None: none was.
    stopped_by: str | None
    reason: str | None
    marker_seen: bool
    reached_training: bool


@dataclass(frozen=True)
class ReportTrainingReached:
    """Informative: the generation's workers wrote beyond their start-up files `after` seconds into it (what a restart
    costs ends here)."""

    after: float


@dataclass(frozen=True)
class ReportMarkerSeen:
    """Informative: the completion marker is there; the workers get the grace to exit."""


@dataclass(frozen=True)
class AnnounceStop:
    """Multi-node: tell every node the job stops (this node's pai-launch got `signum`)."""

    signum: int
    reason: str


@dataclass(frozen=True)
class RecheckProgress:
    """Look at the save folder again: a shared file system may show another node's switch file late."""


@dataclass(frozen=True)
class Finish:
    exit_code: int
    reason: str


Action = (StartInit | AdoptSaveFolder | StartGeneration | PrepareAgent | ReplaceAgent | SignalRun | KillRun
          | ScheduleRetry | ReportStall | ReportAgentHung | ReportRunaway | ReportInitEnd | ReportGenerationEnd
          | ReportTrainingReached | ReportMarkerSeen | AnnounceStop | RecheckProgress | Finish)
