"""The run's story from SAVE/.pai-launch/events.jsonl: sessions, the init run, generations, failures and retries.

Pure: text in, dataclasses out. A torn last line (the file is appended while we read) or a line that is not
an event is skipped. Here: the lines and their times, folded in order; what each event does to the story is
status.story's.
"""

from __future__ import annotations

import calendar
import json
import time

from pai_launch.status.model import INTERRUPTED, RUNNING, History, Problem, Session
from pai_launch.status.story import HANDLERS, PROBLEM_EVENTS, Story, problem_text
from pai_launch.wire import log_events


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


def _fold(story: Story, event: dict) -> None:
    """One event into the story: the run's first and last time, a new session at run_started, then its handler or
    its problem line."""
    name, now = event["event"], parse_time(event.get("time"))
    history = story.history
    if now is not None:
        history.first = now if history.first is None else min(history.first, now)
        history.last = now if history.last is None else max(history.last, now)
    if name == log_events.RUN_STARTED:
        if len(history.sessions) == 1 and history.sessions[0].pid is None and not history.generations:
            history.sessions.clear()  # the lines before it (metrics_serving, say) belong to this start
        history.sessions.append(Session(started=now, pid=event.get("pid"), resumed=bool(event.get("resumed"))))
    session = story.session
    session.last_event = now
    handler = HANDLERS.get(name)
    if handler is not None:
        handler(story, event, now, session)
    elif name in PROBLEM_EVENTS:
        history.problems.append(Problem(now, name, problem_text(event, PROBLEM_EVENTS[name])))


def history(events: list[dict]) -> History:
    """The run's story from its events, in the order they were written."""
    story = Story()
    for event in events:
        _fold(story, event)
    sessions = story.history.sessions
    for generation in story.history.generations:  # a later pai-launch started: the one before was killed
        if generation.outcome == RUNNING and generation.session < len(sessions) - 1:
            generation.outcome = INTERRUPTED
            generation.detail = "pai-launch was killed (or its machine lost) while it ran; the next start resumed"
    return story.history
