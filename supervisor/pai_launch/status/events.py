"""The run's story from SAVE/.pai-launch/events.jsonl: sessions, the init run, generations, failures and retries.

Pure: text in, dataclasses out. A torn last line (the file is appended while we read) or a line that is not
an event is skipped.
"""

from __future__ import annotations

import calendar
import json
import time
from dataclasses import dataclass, field

from pai_launch.wire import log_events
from pai_launch.wire import failure_causes
from pai_launch.status.model import (
    COMPLETE, FAILED, INTERRUPTED, NO_PROGRESS, REJECTED, RESTRUCTURED, RUNNING, STOPPED, Generation, InitRun, Problem,
    Session,
)

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
}


@dataclass
class History:
    sessions: list[Session] = field(default_factory=list)
    init: InitRun | None = None
    generations: list[Generation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    retries: int = 0
    first: float | None = None
    last: float | None = None


def parse_time(text: object) -> float | None:
    """'2026-12-01T16:43:08Z' (events.jsonl's "time", UTC) or an ISO stamp with fractions -> epoch seconds."""
    if not isinstance(text, str):
        return None
    stamp = text.rstrip("Z")
    whole, _, fraction = stamp.partition(".")
    try:
        seconds = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    try:
        return seconds + (float("0." + fraction.split("+")[0]) if fraction else 0.0)
    except ValueError:
        return float(seconds)


def refine_start(start: float | None, end: float | None, duration: float | None) -> float | None:
    """A start time to better than the events' whole seconds: the start lies in [start, start+1), the end in
    [end, end+1), and they are `duration` apart (measured precisely); the middle of what that leaves."""
    if end is None or duration is None:
        return start
    if start is None:
        return end + 0.5 - duration
    low, high = max(start, end - duration), min(start + 1.0, end + 1.0 - duration)
    return (low + high) / 2 if low <= high else start


def parse_lines(text: str) -> list[dict]:
    """Every JSON object with an "event" in `text`, in order; anything else is skipped."""
    events = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            events.append(event)
    return events


def _problem_text(event: dict, keys: tuple[str, ...]) -> str:
    parts = [f"{key} {event[key]}" if key not in ("reason", "error", "problem", "tail") else str(event[key])
             for key in keys if event.get(key) not in (None, "")]
    return "; ".join(parts)


def _cause_text(tail: str) -> str:
    """'; cause: ... (pai-launch doctor check ...; fix: ...)' for a known failure, else nothing."""
    cause = failure_causes.known_cause(tail)
    return "" if cause is None else f"; cause: {cause.name} (pai-launch doctor check {cause.id}; fix: {cause.fix})"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _Reader:
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

    def read(self, event: dict) -> None:
        name, now = event["event"], parse_time(event.get("time"))
        history = self.history
        if now is not None:
            history.first = now if history.first is None else min(history.first, now)
            history.last = now if history.last is None else max(history.last, now)
        if name == log_events.RUN_STARTED:
            if len(history.sessions) == 1 and history.sessions[0].pid is None and not history.generations:
                history.sessions.clear()  # the lines before it (metrics_serving, say) belong to this start
            history.sessions.append(Session(started=now, pid=event.get("pid"), resumed=bool(event.get("resumed"))))
        session = self.session
        session.last_event = now
        handler = getattr(self, f"on_{name}", None)
        if handler is not None:
            handler(event, now, session)
        elif name in PROBLEM_EVENTS:
            history.problems.append(Problem(now, name, _problem_text(event, PROBLEM_EVENTS[name])))

    # --- one method per event that shapes the story -------------------------------------------------
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

    on_training_started = on_generation_started  # --data-parallel: one long "generation"

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
        self.history.problems.append(Problem(now, "init_output_tail", _problem_text(event, PROBLEM_EVENTS["init_output_tail"])))
        tail = str(event.get("tail") or "")
        failed = [p for p in self.history.problems if p.kind == "init_failed"]
        if failed and tail.strip() and "last log line" not in failed[-1].text:
            failed[-1].text += f"; last log line: {failure_causes.explaining_line(tail)[:200]}{_cause_text(tail)}"

    def on_retry_scheduled(self, event: dict, now: float | None, session: Session) -> None:
        self.history.retries += 1
        self.history.problems.append(Problem(now, "retry_scheduled", _problem_text(event, PROBLEM_EVENTS["retry_scheduled"])))

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


def history(events: list[dict]) -> History:
    """The run's story from its events, in the order they were written."""
    reader = _Reader()
    for event in events:
        reader.read(event)
    sessions = reader.history.sessions
    for generation in reader.history.generations:  # a later pai-launch started: the one before was killed
        if generation.outcome == RUNNING and generation.session < len(sessions) - 1:
            generation.outcome = INTERRUPTED
            generation.detail = "pai-launch was killed (or its machine lost) while it ran; the next start resumed"
    return reader.history


def unknown_handlers(reader: type = _Reader) -> list[str]:
    """Handlers (`on_<event>`) for events pai-launch does not log: a renamed event would leave its handler unread.
    Checked as this module is imported."""
    return sorted(name[3:] for name in dir(reader) if name.startswith("on_") and name[3:] not in log_events.ALL)


if unknown_handlers():
    raise ImportError(f"status.events reads events pai-launch never logs: {', '.join(unknown_handlers())}")
