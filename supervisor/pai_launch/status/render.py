"""A RunStatus as text for a terminal, or as JSON with stable keys (times as ISO 8601 UTC, durations in seconds)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from pai_launch.status.model import RunStatus
from pai_launch.status.summary import ago, duration

#: Bumped when a key is removed or changes meaning (new keys may appear at any time).
JSON_FORMAT = 1
#: Restart gaps shorter than this are not listed (events are stamped to the second).
GAP_SHOWN = 1.0
_TIME_KEYS = frozenset({"started", "ended", "since", "time", "complete_at", "now", "last_event"})


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{int(round((seconds % 1) * 1000)) % 1000:03d}Z"


def _clock(seconds: float | None) -> str:
    return "?" if seconds is None else time.strftime("%H:%M:%S", time.localtime(seconds))


def _when(seconds: float | None) -> str:
    return "?" if seconds is None else time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(seconds))


def _times_as_iso(value):
    if isinstance(value, dict):
        return {key: (iso(item) if key in _TIME_KEYS and isinstance(item, (int, float)) else _times_as_iso(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [_times_as_iso(item) for item in value]
    return value


def to_dict(status: RunStatus) -> dict:
    data = _times_as_iso(asdict(status))
    data["supervisor"] = _times_as_iso(asdict(status.supervisor)) if status.supervisor else None
    data["scores"]["epochs"] = [{"epoch": e, "score": s} for e, s in status.scores.epochs]
    data["format"] = JSON_FORMAT
    return data


def render_json(status: RunStatus, *, indent: int | None = 2) -> str:
    """Sorted keys, so the same status is always the same text; indent=None: one line (a --watch frame)."""
    return json.dumps(to_dict(status), indent=indent, sort_keys=True)


def _score(value: float | None) -> str:
    return "?" if value is None else f"{value:.4g}"


def _supervisor_line(status: RunStatus) -> str:
    sup = status.supervisor
    if sup is None:
        return "none: no pai-launch lock file" if status.source == "perforatedai" else "not running (no lock file)"
    if sup.running:
        node = f", node {sup.node}" if sup.node or len(status.supervisors) > 1 else ""
        return f"running: PID {sup.pid} on {sup.host}{node}, for {ago(status.now, sup.since)}"
    if status.state == "finished" and sup.pid is not None:
        return f"not running (the last one, PID {sup.pid}, has exited)"
    return f"not running ({sup.how})"


def _dendrite_line(status: RunStatus) -> str:
    d = status.dendrites
    if d.count is None:
        return "unknown (no param_counts.csv, switch_epochs.csv or switch file)"
    of = f" of at most {d.max_dendrites}" if d.max_dendrites is not None else ""
    if d.max_dendrites is not None and d.count > d.max_dendrites:
        of += f", PAST THE MAXIMUM ({d.max_from})"
    growth = f"; parameters {' -> '.join(str(c) for c in d.param_counts)}" if len(d.param_counts) > 1 else ""
    epochs = f"; added at epoch {', '.join(str(e) for e in d.epochs)}" if d.epochs else ""
    return f"{d.count}{of}{epochs}{growth} (from {d.source})"


def _score_lines(status: RunStatus) -> list[str]:
    s = status.scores
    if not s.epochs:
        return ["best score:  unknown (no <save>Scores.csv: PerforatedAI writes it with graphs on)"]
    if s.best is None:
        low, high = min(s.epochs, key=lambda p: p[1]), max(s.epochs, key=lambda p: p[1])
        return [f"best score:  direction {s.direction_how}; lowest {_score(low[1])} (epoch {low[0]}), highest "
                f"{_score(high[1])} (epoch {high[0]}), last {_score(s.last)}"]
    trend = f"; {s.trend}: {s.trend_detail}" if s.trend else ""
    return [f"best score:  {_score(s.best)} at epoch {s.best_epoch} ({len(s.epochs)} epochs, last "
            f"{_score(s.last)}){trend}",
            f"             {s.direction} ({s.direction_how}; from {s.source})"]


def _generation_lines(status: RunStatus) -> list[str]:
    lines = []
    init = status.init
    if init is not None:
        how = "times from file dates" if init.inferred else (init.exit or "running")
        tries = f", attempt {init.attempts}" if init.attempts > 1 else ""
        lines.append(f"  init run      {_clock(init.started)}  {duration(init.duration):>10}  {how}{tries}")
    previous_end = init.started + init.duration if init and init.started is not None and init.duration is not None \
        else None
    for g in status.generations:
        if previous_end is not None and g.started is not None and g.started - previous_end >= GAP_SHOWN \
                and not g.inferred:
            lines.append(f"                {'':8}  {duration(g.started - previous_end):>10}  (restart gap)")
        length = duration(g.duration) if g.duration is not None else (
            f"{duration(status.now - g.started)}+" if g.outcome == "running" and g.started is not None else "?")
        files = f"  {', '.join(g.switch_files)}" if g.switch_files else ""
        if g.in_process:
            files += f" ({g.in_process} restructure{'s' if g.in_process != 1 else ''} in process)"
        detail = f": {g.detail}" if g.detail and g.detail not in ("dendrites added", "training complete") else ""
        lines.append(f"  generation {g.number:<2} {_clock(g.started)}  {length:>10}  {g.outcome}{detail}{files}")
        previous_end = g.started + g.duration if g.started is not None and g.duration is not None else None
    return lines or ["  none yet"]


def _until(status: RunStatus) -> str:
    """The end of the elapsed line: only a running supervisor's run is still going."""
    if status.ended is not None:
        return " to " + _clock(status.ended)
    return ", still going" if status.state == "running" else ", its end not known"


def render_text(status: RunStatus) -> str:
    """What a person wants at a glance: where the run is, how far it got, what went wrong."""
    command = ""
    if status.script:
        args = f" {' '.join(status.script_args)}" if status.script_args else ""
        command = f" ({status.script}{args}, {status.nproc} process(es))"
    lines = [f"save folder: {status.save}",
             f"run:         {status.run_id or 'no pai-launch record'}{command}",
             f"status:      {status.state}: {status.phase}" if not status.phase.startswith(status.state) else
             f"status:      {status.phase}",
             f"supervisor:  {_supervisor_line(status)}",
             f"elapsed:     {duration(status.elapsed)} (from {_when(status.started)}"
             f"{_until(status)})",
             f"dendrites:   {_dendrite_line(status)}",
             *_score_lines(status)]
    restarts = len(status.sessions) - 1
    lines.append(f"failures:    {status.failures} failed generation(s), {status.retries} "
                 f"retr{'y' if status.retries == 1 else 'ies'}"
                 + (f", {restarts} resume(s) of pai-launch" if restarts > 0 else ""))
    source = " (inferred from PerforatedAI's files)" if status.source == "perforatedai" and status.generations else ""
    if status.earlier:
        last = status.earlier[-1]
        ended = (last.get("last_exit") or {}).get("code")
        lines.append(f"invocations: {len(status.earlier) + 1} (each with its own failure budget; the one before ended "
                     f"with exit {'?' if ended is None else ended} after {last.get('failures', '?')} failed "
                     "generation(s) in a row; this one: "
                     f"{status.budget_used if status.budget_used is not None else '?'})")
    lines.append(f"generations: {len(status.generations)}{source}")
    lines += _generation_lines(status)
    if status.problems:
        lines.append("problems:")
        lines += [f"  {_clock(p.time)}  {p.kind}: {p.text}" for p in status.problems[-10:]]
        if len(status.problems) > 10:
            lines.append(f"  ... {len(status.problems) - 10} earlier (see --json)")
    lines += [f"note:        {note}" for note in status.notes]
    return "\n".join(lines) + "\n"
