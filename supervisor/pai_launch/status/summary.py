"""One RunStatus from everything gathered: pai-launch's story (events, state.json), the supervisors seen, and
PerforatedAI's files. Pure: `now` comes in as a value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pai_launch.status.model import (
    FAILED,
    INTERRUPTED,
    RUNNING,
    Dendrites,
    Generation,
    History,
    InitRun,
    RunStatus,
    Scores,
    Supervisor,
)


@dataclass
class Facts:
    """Everything status.gather read, already parsed."""

    save: str
    now: float
    history: History | None = None  # None: no events file
    record: dict | None = None  # state.json
    supervisors: list[Supervisor] = field(default_factory=list)
    dendrites: Dendrites = field(default_factory=Dendrites)
    scores: Scores = field(default_factory=Scores)
    marker_time: float | None = None
    inferred_init: InitRun | None = None
    inferred_generations: list[Generation] = field(default_factory=list)
    latest_time: float | None = None  # latest.pt: PerforatedAI's per-epoch write
    notes: list[str] = field(default_factory=list)


def ago(now: float, then: float | None) -> str:
    return "a moment" if then is None else duration(max(0.0, now - then))


def duration(seconds: float | None) -> str:
    """'4.2 s', '3 min 05 s', '2 h 07 min'."""
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def summarise(facts: Facts) -> RunStatus:
    history = facts.history
    record = facts.record or {}
    has_launch = bool(history and history.sessions) or bool(record)
    status = RunStatus(save=facts.save, now=facts.now, source="pai-launch" if has_launch else "perforatedai",
                       state="unknown", phase="", supervisors=list(facts.supervisors), dendrites=facts.dendrites,
                       scores=facts.scores, notes=list(facts.notes))
    fingerprint = record.get("fingerprint") if isinstance(record.get("fingerprint"), dict) else {}
    status.run_id = record.get("run_id")
    status.script, status.nproc = fingerprint.get("script"), fingerprint.get("nproc")
    status.script_args = list(fingerprint.get("script_args") or [])
    status.complete, status.complete_at = facts.marker_time is not None, facts.marker_time
    if has_launch and history is not None and (history.sessions or history.generations):
        status.init, status.generations = history.init, history.generations
        status.sessions, status.problems, status.retries = history.sessions, history.problems, history.retries
    else:
        status.init, status.generations = facts.inferred_init, facts.inferred_generations
    status.failures = sum(g.outcome == FAILED for g in status.generations)
    status.budget_used = record.get("failures") if isinstance(record.get("failures"), int) else None
    status.earlier = [item for item in record.get("history") or [] if isinstance(item, dict)]
    running = any(s.running for s in status.supervisors)
    if has_launch:
        _launch_state(status, facts, running)
    else:
        _files_only_state(status, facts)
    status.started = _first(history.first if history else None, status.init.started if status.init else None,
                            *(g.started for g in status.generations))
    end = status.ended if status.ended is not None else facts.now
    status.elapsed = end - status.started if status.started is not None else None
    return status


def _first(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _launch_state(status: RunStatus, facts: Facts, running: bool) -> None:
    history = facts.history
    last = history.sessions[-1] if history and history.sessions else None
    last_exit = (facts.record or {}).get("last_exit") or {}
    if running:
        status.state, status.phase = "running", _doing_now(status, facts)
        return
    if last is not None and last.ended is not None:
        status.state, status.ended = "finished", last.ended
        status.exit_code, status.exit_reason = last.exit_code, last.reason
    elif last is None and last_exit.get("code") is not None:  # no events file, but state.json says how it ended
        status.state, status.exit_code, status.exit_reason = "finished", last_exit.get("code"), last_exit.get("reason")
    if status.state == "finished":
        how = "stopped as asked" if last is not None and last.stopped_by else "finished"
        status.phase = f"{how}: exit code {status.exit_code} ({status.exit_reason or 'no reason recorded'})"
        return
    status.state = "interrupted"
    status.ended = history.last if history else None
    for generation in status.generations:
        if generation.outcome == RUNNING:
            generation.outcome = INTERRUPTED
            generation.detail = "pai-launch is gone (killed, crashed, or its machine lost)"
    if status.init is not None and status.init.exit is None:
        status.init.exit, status.init.ok = "interrupted", False
    status.phase = (f"pai-launch is not running and logged no end: it was killed or its machine was lost (last event "
                    f"{ago(facts.now, status.ended)} ago); the same command resumes the run")


def _doing_now(status: RunStatus, facts: Facts) -> str:
    now, history = facts.now, facts.history
    session = history.sessions[-1] if history and history.sessions else None
    if session is not None and session.signal:
        return f"stopping: {session.signal} received"
    init = status.init
    if init is not None and init.exit is None and init.started is not None and (
            not status.generations or status.generations[-1].started is None or status.generations[-1].started
            < init.started):
        return f"init run (--perforate_model_parallel), running for {ago(now, init.started)}"
    current = status.generations[-1] if status.generations else None
    if current is not None and current.outcome == RUNNING:
        more = "; the completion marker is there, its workers are exiting" if session and session.marker_seen else ""
        return f"generation {current.number} running for {ago(now, current.started)}{more}"
    retries = [p for p in status.problems if p.kind == "retry_scheduled"]
    ended = current.started + (current.duration or 0) if current and current.started is not None else None
    if retries and (ended is None or (retries[-1].time or 0) >= ended - 1):
        return f"waiting to retry ({retries[-1].text})"
    return "between generations" if current is not None else "starting"


def _files_only_state(status: RunStatus, facts: Facts) -> None:
    if status.complete:
        status.state, status.ended = "finished", facts.marker_time
        status.phase = "training complete (the completion marker is there); no pai-launch ran this folder"
        return
    if not status.generations and status.init is None:
        status.state, status.phase = "not started", "no init run and no generation yet"
        return
    status.ended = _first(facts.latest_time) if facts.latest_time is not None else None
    status.phase = ("no pai-launch ran this folder, so whether training goes on cannot be told: PerforatedAI last "
                    "wrote "
                    f"latest.pt {ago(facts.now, facts.latest_time)} ago" if facts.latest_time is not None else
                    "no pai-launch ran this folder; no epoch was saved yet")
