"""What each event that shapes the run's story does to it: the init run, generations and how they ended, the
signals that stopped them, retries and problem lines. One Story method per event, found through HANDLERS, which is
checked against wire.log_events' vocabulary as this module is imported; the reading and folding is status.events'.
"""

from __future__ import annotations

from typing import Callable, Mapping

from pai_launch.status.model import (
    COMPLETE,
    FAILED,
    INTERRUPTED,
    NO_PROGRESS,
    REJECTED,
    RESTRUCTURED,
    RUNNING,
    STOPPED,
    Generation,
    History,
    InitRun,
    Problem,
    Session,
)
from pai_launch.wire import failure_causes, log_events

#: The signals that stop a run (an older pai-launch logged the generation they ended as failed).
STOP_SIGNAL_NAMES = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")

#: Events shown as a problem line, with the fields that say what happened.
PROBLEM_EVENTS = {
    log_events.RETRY_SCHEDULED: ("reason", "failures", "max_failures", "delay_s"),
    log_events.STALL_DETECTED: ("generation", "idle_s", "action"),
    log_events.AGENT_HUNG: ("generation", "silent_s", "action"),
    log_events.CHECKPOINT_QUARANTINED: ("file", "problem", "moved_to"),
    log_events.RESUMING_FROM_SCRATCH: ("reason",),
    log_events.SAVE_FOLDER_FAILED: ("reason",),
    log_events.INTERNAL_ERROR: ("error", "hint"),
    log_events.JOB_STORE_LOST: ("reason",),
    log_events.AGENT_REPLACED: ("agent_pid", "exit", "reason"),
    log_events.RUN_KILLED: ("processes",),
    log_events.REQUEUE_FAILED: ("error",),
    log_events.INIT_OUTPUT_TAIL: ("tail",),
    log_events.IN_PROCESS_UNUSED: ("generation", "hint"),
    log_events.AGENT_SLOW_START: ("agent_pid", "waited_s", "hint"),
    log_events.DENDRITES_PAST_MAXIMUM: ("generation", "dendrites", "max_dendrites", "limit_from", "hint"),
}


def refine_start(start: float | None, end: float | None, duration: float | None) -> float | None:
    """A start time to better than the events' whole seconds: the start lies in [start, start+1), the end in
    [end, end+1), and they are `duration` apart (measured precisely); the middle of what that leaves."""
    if end is None or duration is None:
        return start
    if start is None:
        return end + 0.5 - duration
    low, high = max(start, end - duration), min(start + 1.0, end + 1.0 - duration)
    return (low + high) / 2 if low <= high else start


def problem_text(event: dict, keys: tuple[str, ...]) -> str:
    parts = [f"{key} {event[key]}" if key not in ("reason", "error", "problem", "tail") else str(event[key])
             for key in keys if event.get(key) not in (None, "")]
    return "; ".join(parts)


def _cause_text(tail: str) -> str:
    """'; cause: ... (pai-launch doctor check ...; fix: ...)' for a known failure, else nothing."""
    cause = failure_causes.known_cause(tail)
    return "" if cause is None else f"; cause: {cause.name} (pai-launch doctor check {cause.id}; fix: {cause.fix})"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class Story:
    """The story so far, and one method per event that shapes it (found through HANDLERS)."""

    def __init__(self) -> None:
        self.history = History()
        #: Generations whose switch files held no new dendrites (dendrites_rejected), shown so when they end.
        self.rejected: list[Generation] = []

    @property
    def session(self) -> Session:
        if not self.history.sessions:  # events before any run_started: an implicit first session
            self.history.sessions.append(Session())
        return self.history.sessions[-1]

    def current(self, number: object) -> Generation | None:
        """The running generation called `number` in this session (else the last running one)."""
        index = len(self.history.sessions) - 1
        running = [g for g in self.history.generations if g.outcome == RUNNING and g.session == max(index, 0)]
        for generation in reversed(running):
            if generation.number == number:
                return generation
        return running[-1] if running else None

    def on_init_started(self, event: dict, now: float | None, session: Session) -> None:
        attempts = self.history.init.attempts + 1 if self.history.init else 1
        self.history.init = InitRun(started=now, attempts=attempts)

    def on_init_exited(self, event: dict, now: float | None, session: Session) -> None:
        init = self.history.init or InitRun()
        self.history.init = init
        init.duration, init.exit = _number(event.get("duration_s")), event.get("exit")
        init.ok = init.exit == "exit code 0"
        init.started = refine_start(init.started, now, init.duration)
        if event.get("stopped_by"):
            init.exit = f"stopped ({event['stopped_by']})"
        elif not init.ok:
            self.history.problems.append(Problem(now, "init_failed", f"the init run ended with {init.exit}"))

    def on_generation_started(self, event: dict, now: float | None, session: Session) -> None:
        number = event.get("generation")
        self.history.generations.append(Generation(
            number=number if isinstance(number, int) else len(self.history.generations) + 1, started=now,
            load_folder=event.get("load_folder"), session=len(self.history.sessions) - 1))

    def on_switch_written(self, event: dict, now: float | None, session: Session) -> None:
        generation = self.current(event.get("generation"))
        name = event.get("file")
        if generation is not None and isinstance(name, str) and name not in generation.switch_files:
            generation.switch_files.append(name)

    def on_dendrites_added(self, event: dict, now: float | None, session: Session) -> None:
        """Logged when the generation ends with more dendrites (an older pai-launch logged it per switch file)."""
        self.on_switch_written(event, now, session)
        generation = self.current(event.get("generation"))
        if generation is not None and isinstance(event.get("dendrites"), int):
            generation.dendrites = event["dendrites"]

    def on_restructured_in_process(self, event: dict, now: float | None, session: Session) -> None:
        """A restructure inside the running workers: the generation goes on, one more switch file and dendrite count."""
        self.on_switch_written(event, now, session)
        generation = self.current(event.get("generation"))
        if generation is not None:
            generation.in_process += 1
            if isinstance(event.get("dendrites"), int):
                generation.dendrites = event["dendrites"]

    def on_dendrites_rejected(self, event: dict, now: float | None, session: Session) -> None:
        generation = self.current(event.get("generation"))
        if generation is not None:
            self.rejected.append(generation)
            generation.dendrites = event["dendrites"] if isinstance(event.get("dendrites"), int) else None

    def on_signal_received(self, event: dict, now: float | None, session: Session) -> None:
        if event.get("signal") in STOP_SIGNAL_NAMES:  # SIGUSR1/2 are passed on to the workers; the run goes on
            session.signal = session.signal or event.get("signal")

    def on_completion_marker_seen(self, event: dict, now: float | None, session: Session) -> None:
        session.marker_seen = True

    def _ended(self, event: dict, now: float | None) -> Generation | None:
        generation = self.current(event.get("generation"))
        if generation is None:
            return None
        generation.duration = _number(event.get("duration_s"))
        generation.started = refine_start(generation.started, now, generation.duration)
        files = event.get("switch_files")
        if isinstance(files, list):
            generation.switch_files = sorted(set(generation.switch_files) | {str(f) for f in files})
        return generation

    def on_generation_ended(self, event: dict, now: float | None, session: Session) -> None:
        generation = self._ended(event, now)
        if generation is None:
            return
        if event.get("complete"):
            generation.outcome, generation.detail = COMPLETE, "training complete"
        elif generation.switch_files and any(g is generation for g in self.rejected):
            generation.outcome, generation.detail = REJECTED, "no improvement, the model from before them was kept"
        elif generation.switch_files:
            generation.outcome, generation.detail = RESTRUCTURED, "dendrites added"
        else:
            generation.outcome, generation.detail = NO_PROGRESS, "every worker exited 0 without a switch file"

    def on_generation_failed(self, event: dict, now: float | None, session: Session) -> None:
        generation = self._ended(event, now)
        if generation is None:
            return
        rank, exit_ = event.get("rank"), event.get("exit")
        generation.rank = rank if isinstance(rank, int) else None
        generation.exit = exit_ if isinstance(exit_, str) else None
        if session.signal is not None:
            generation.outcome, generation.detail = STOPPED, f"{session.signal} received"
            return
        generation.outcome = FAILED
        if generation.rank is not None:
            host = f" on node {event['node']} ({event.get('host')})" if "node" in event else ""
            generation.detail = f"rank {generation.rank}{host} failed with {generation.exit}"
        else:
            generation.detail = str(event.get("error") or generation.exit or "failed")

    def on_generation_stopped(self, event: dict, now: float | None, session: Session) -> None:
        """Asked for: not a failure. A rank that crashed of its own meanwhile is named in the detail."""
        generation = self._ended(event, now)
        if generation is None:
            return
        generation.outcome, generation.detail = STOPPED, str(event.get("reason") or event.get("cause") or "stopped")
        rank = event.get("rank")
        if isinstance(rank, int):
            generation.rank, generation.exit = rank, str(event.get("exit") or "")
            line = f" ({str(event['log_line'])[:200]})" if event.get("log_line") else ""
            generation.detail += f"; rank {rank} had exited with {generation.exit}{line}"

    def on_worker_log_tail(self, event: dict, now: float | None, session: Session) -> None:
        ended = [g for g in self.history.generations if g.outcome == FAILED]
        tail = str(event.get("tail") or "")
        if ended and tail.strip() and "last log line" not in ended[-1].detail:
            ended[-1].detail += f"; last log line: {failure_causes.explaining_line(tail)[:200]}{_cause_text(tail)}"

    def on_init_output_tail(self, event: dict, now: float | None, session: Session) -> None:
        """The tail as a problem line of its own; the init failure's line gets what explains it."""
        self.history.problems.append(Problem(now, "init_output_tail",
                                             problem_text(event, PROBLEM_EVENTS["init_output_tail"])))
        tail = str(event.get("tail") or "")
        failed = [p for p in self.history.problems if p.kind == "init_failed"]
        if failed and tail.strip() and "last log line" not in failed[-1].text:
            failed[-1].text += f"; last log line: {failure_causes.explaining_line(tail)[:200]}{_cause_text(tail)}"

    def on_retry_scheduled(self, event: dict, now: float | None, session: Session) -> None:
        self.history.retries += 1
        self.history.problems.append(Problem(now, "retry_scheduled",
                                             problem_text(event, PROBLEM_EVENTS["retry_scheduled"])))

    def on_run_finished(self, event: dict, now: float | None, session: Session) -> None:
        session.ended = now
        code = event.get("exit_code")
        session.exit_code = code if isinstance(code, int) else None
        session.reason = event.get("reason")
        session.stopped_by = event.get("stopped_by") if isinstance(event.get("stopped_by"), str) else None
        for generation in self.history.generations:  # a generation the run ended without an end line of its own
            if generation.outcome == RUNNING and generation.session == len(self.history.sessions) - 1:
                generation.outcome = STOPPED if (session.exit_code or 0) >= 128 else INTERRUPTED
                generation.detail = str(session.reason or "the run ended")


#: Each event that shapes the story and the Story method that reads it, named on_<the event it is written for>
#: (whose declared fields are the ones it may read). Any other event in PROBLEM_EVENTS is a problem line.
HANDLERS: dict[str, Callable[[Story, dict, float | None, Session], None]] = {
    log_events.INIT_STARTED: Story.on_init_started,
    log_events.INIT_EXITED: Story.on_init_exited,
    log_events.GENERATION_STARTED: Story.on_generation_started,
    log_events.TRAINING_STARTED: Story.on_generation_started,  # --data-parallel: one long "generation"
    log_events.SWITCH_WRITTEN: Story.on_switch_written,
    log_events.DENDRITES_ADDED: Story.on_dendrites_added,
    log_events.RESTRUCTURED_IN_PROCESS: Story.on_restructured_in_process,
    log_events.DENDRITES_REJECTED: Story.on_dendrites_rejected,
    log_events.SIGNAL_RECEIVED: Story.on_signal_received,
    log_events.COMPLETION_MARKER_SEEN: Story.on_completion_marker_seen,
    log_events.GENERATION_ENDED: Story.on_generation_ended,
    log_events.GENERATION_FAILED: Story.on_generation_failed,
    log_events.GENERATION_STOPPED: Story.on_generation_stopped,
    log_events.WORKER_LOG_TAIL: Story.on_worker_log_tail,
    log_events.INIT_OUTPUT_TAIL: Story.on_init_output_tail,
    log_events.RETRY_SCHEDULED: Story.on_retry_scheduled,
    log_events.RUN_FINISHED: Story.on_run_finished,
}


def unknown_handlers(handlers: Mapping[str, Callable] = HANDLERS) -> list[str]:
    """Events the handlers are for that pai-launch does not log, by the table's key or by the handler's name (a
    renamed event would leave its handler unread, or its fields unchecked). Checked as this module is imported."""
    named = set(handlers) | {handler.__name__.removeprefix("on_") for handler in handlers.values()}
    return sorted(named - log_events.ALL)


def unreached_handlers(story: type = Story, handlers: Mapping[str, Callable] = HANDLERS) -> list[str]:
    """Story's on_<event> methods that no entry of the table reaches. Checked as this module is imported."""
    reached = {handler.__name__ for handler in handlers.values()}
    return sorted(name for name in dir(story) if name.startswith("on_") and name not in reached)


if unknown_handlers() or unreached_handlers():
    raise ImportError(f"status.story: handlers for events pai-launch never logs: {', '.join(unknown_handlers())}; "
                      f"handlers HANDLERS does not name: {', '.join(unreached_handlers())}")
