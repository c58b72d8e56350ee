"""What `pai-launch status` knows about a run: plain dataclasses, filled by status.events, status.pai and
status.live, summarised by status.summary, shown by status.render and status.timeline.

Times are wall-clock seconds since the epoch (None when unknown); durations are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pai_launch.savefmt.pai_files import Dendrites, Scores  # noqa: F401 - part of RunStatus


class StatusError(Exception):
    """The folder cannot be shown (missing, not a save folder) or the picture cannot be drawn: one line naming the
    folder or file, the problem and the fix."""


#: How a generation ended (Generation.outcome).
RESTRUCTURED = "restructured"  # every worker exited 0 and a switch file was written: dendrites added
REJECTED = "dendrites rejected"  # a switch file was written, but PerforatedAI kept no new dendrite (no improvement)
COMPLETE = "complete"  # the completion marker was written
FAILED = "failed"  # a worker (or the launcher) failed
STOPPED = "stopped"  # stopped by a signal or by the job
NO_PROGRESS = "no progress"  # every worker exited 0, nothing written
RUNNING = "running"  # no end yet, and a supervisor is running
INTERRUPTED = "interrupted"  # no end, and the pai-launch that ran it is gone (kill -9, a crash, a lost machine)
UNKNOWN = "unknown"  # inferred from PerforatedAI's files: something ran after the last switch file


@dataclass
class InitRun:
    started: float | None = None
    duration: float | None = None
    exit: str | None = None  # "exit code 0"; None while it runs
    ok: bool | None = None
    attempts: int = 1
    inferred: bool = False  # from array_dims.csv's time only


@dataclass
class Generation:
    number: int
    started: float | None = None
    duration: float | None = None  # None while running or unknown
    outcome: str = RUNNING
    detail: str = ""  # one line: the exit cause, the signal, the rank's last log line
    rank: int | None = None  # the failing rank
    exit: str | None = None  # "exit code 3", "signal SIGKILL"
    switch_files: list[str] = field(default_factory=list)
    load_folder: str | None = None
    session: int = 0  # which pai-launch (0, 1, ...: one per start) ran it
    dendrites: int | None = None  # dendrites in the model when it ended (dendrites_added / dendrites_rejected)
    in_process: int = 0  # restructures inside its running workers (--restructure in-process)
    inferred: bool = False  # from PerforatedAI's files only; times are file times


@dataclass
class Session:
    """One pai-launch from run_started to run_finished (a resume starts another)."""

    started: float | None = None
    pid: int | None = None
    resumed: bool = False
    ended: float | None = None
    exit_code: int | None = None
    reason: str | None = None
    last_event: float | None = None
    signal: str | None = None  # the stop signal it received, if any
    stopped_by: str | None = None  # what asked for the stop it ended with (run_finished's stopped_by), if any
    marker_seen: bool = False


@dataclass
class Problem:
    """A failure, retry or warning worth a line: a retry, a stall, a quarantined checkpoint, an internal error."""

    time: float | None
    kind: str  # the event name: retry_scheduled, stall_detected, checkpoint_quarantined, ...
    text: str


@dataclass
class History:
    """The run's story as its events file tells it (status.events, through status.story's handlers), before the
    folder's files are read."""

    sessions: list[Session] = field(default_factory=list)
    init: InitRun | None = None
    generations: list[Generation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    retries: int = 0
    first: float | None = None
    last: float | None = None


@dataclass
class Supervisor:
    """What the folder's lock says about the pai-launch of one node."""

    node: int
    running: bool
    pid: int | None = None
    host: str | None = None
    since: float | None = None
    how: str = ""  # how this was decided






@dataclass
class RunStatus:
    save: str  # the folder, absolute
    now: float
    source: str  # "pai-launch" (its .pai-launch/ files) or "perforatedai" (PerforatedAI's files alone)
    state: str  # "running" | "finished" | "interrupted" | "not started" | "unknown"
    phase: str  # one line: what the run is doing now, or how it ended
    run_id: str | None = None
    script: str | None = None
    script_args: list[str] = field(default_factory=list)
    nproc: int | None = None
    exit_code: int | None = None
    exit_reason: str | None = None
    complete: bool = False
    complete_at: float | None = None
    started: float | None = None
    ended: float | None = None  # None while running
    elapsed: float | None = None
    init: InitRun | None = None
    generations: list[Generation] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    failures: int = 0  # failed generations in all
    retries: int = 0
    #: state.json's: failed generations the latest invocation counted against its budget, and how each earlier
    #: invocation ended ({updated, generation, failures, last_exit}).
    budget_used: int | None = None
    earlier: list[dict] = field(default_factory=list)
    supervisors: list[Supervisor] = field(default_factory=list)
    dendrites: Dendrites = field(default_factory=Dendrites)
    scores: Scores = field(default_factory=Scores)
    notes: list[str] = field(default_factory=list)  # files that could not be read, and the like

    @property
    def supervisor(self) -> Supervisor | None:
        """The running supervisor (node 0's first), else node 0's record, else None."""
        running = [s for s in self.supervisors if s.running]
        return (running or self.supervisors or [None])[0]
