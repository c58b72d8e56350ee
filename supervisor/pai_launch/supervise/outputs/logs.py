"""pai-launch's own log lines: readable on a terminal, JSON lines for systemd, Slurm and Docker, and a copy
of every line of a run in SAVE/.pai-launch/events.jsonl.

On a terminal a field whose value has several lines (a log tail) is printed below its event line, one indented
line per line, so its last line (usually the error) is seen where it is, not at the end of one long line.

pai-launch's own lines go to stderr. The training processes' stdout and stderr go to pai-launch's
stdout and stderr, each worker line prefixed with `[rankN]: `. Every logger is built here with its
own processor chain (no process-wide structlog configuration), so a run's events file belongs to
the run that opened it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import structlog

from pai_launch.savefmt.safeopen import open_append


class EventsFile:
    """The run's event history, kept in its save folder whatever the console shows: one JSON line per event.

    A structlog processor. One open handle, written under a lock, so any thread may log; a failed
    write is ignored (the save folder's health is checked elsewhere, and logging must not fail the run).
    Without a path the lines are kept in memory until place() names the file: the save folder is not
    written before the init run has shown which folder the script saves to.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._pending: list[str] = []
        # A regular file only: a pipe left in its place must not block the run (WrongKind, an OSError, instead).
        self._handle: TextIO | None = open_append(path) if path is not None else None

    def __call__(self, logger: Any, method_name: str, event_dict: dict) -> dict:
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z", "level": method_name, **event_dict}
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            if self._handle is None and self.path is None:
                self._pending.append(line)
            elif self._handle is not None:
                try:
                    self._handle.write(line)
                    self._handle.flush()
                except (OSError, ValueError):
                    pass
        return event_dict

    def place(self, path: Path) -> None:
        """Go on writing at `path`, the history so far carried over: the lines kept in memory, or the file written
        until now (renamed when it is still there, copied from its handle when its folder was removed)."""
        with self._lock:
            history = "".join(self._pending)
            if self._handle is not None:
                if self.path is not None and self.path.exists():
                    self._handle.close()
                    os.replace(self.path, path)
                    self._handle = None
                else:
                    self._handle.seek(0)
                    history = self._handle.read()
                    self._handle.close()
            handle = open_append(path)
            if history:
                handle.write(history)
                handle.flush()
            self.path, self._handle, self._pending = path, handle, []

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None


#: Fields the console renderer already prints on lines of their own, or as columns.
_NOT_BLOCKS = frozenset({"event", "timestamp", "level", "logger", "logger_name", "exception", "exc_info", "stack"})


def is_block(key: str, value: Any) -> bool:
    """A field printed below the event line: a string with a line break."""
    return key not in _NOT_BLOCKS and isinstance(value, str) and ("\n" in value or "\r" in value)


def block_text(key: str, value: str) -> str:
    """The lines under an event line for one multi-line field: its name, then each line of the value indented."""
    lines = value.rstrip("\r\n").splitlines() or [""]
    return f"\n  {key}:" + "".join(f"\n    {line}" if line else "\n" for line in lines)


class ConsoleLines:
    """structlog's console renderer, with multi-line string fields moved below the event line (`block_text`);
    single-line fields are rendered as the console renderer renders them."""

    def __init__(self, renderer: Any) -> None:
        self._renderer = renderer

    def __call__(self, logger: Any, method_name: str, event_dict: dict) -> str:
        blocks = {key: value for key, value in event_dict.items() if is_block(key, value)}
        if not blocks:
            return self._renderer(logger, method_name, event_dict)
        rest = {key: value for key, value in event_dict.items() if key not in blocks}
        line = self._renderer(logger, method_name, rest).rstrip()
        return line + "".join(block_text(key, value) for key, value in blocks.items())


def wants_json(log_format: str, stream: TextIO) -> bool:
    if log_format == "json":
        return True
    if log_format == "console":
        return False
    return not stream.isatty()


def make_logger(log_format: str = "auto", stream: TextIO | None = None, events: EventsFile | None = None,
                extra: tuple = ()) -> Any:
    """A logger writing to `stream` (stderr) in `log_format`, and every event to `events` too when given; `extra`:
    more processors that see every event (metrics, the live status line)."""
    stream = stream or sys.stderr
    if wants_json(log_format, stream):
        renderer: Any = structlog.processors.JSONRenderer()
        timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    else:
        renderer = ConsoleLines(structlog.dev.ConsoleRenderer(colors=stream.isatty(), pad_event_to=22))
        timestamper = structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False)
    processors = [*([events] if events is not None else []), *extra, structlog.processors.add_log_level, timestamper,
                  renderer]
    return structlog.wrap_logger(
        structlog.PrintLogger(file=stream),
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        context_class=dict,
        cache_logger_on_first_use=False,
    )
