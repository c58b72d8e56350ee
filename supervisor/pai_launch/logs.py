"""structlog set-up: readable lines on a terminal, JSON lines for systemd, Slurm and Docker.

pai-launch's own lines go to stderr. The training processes' stdout and stderr go to pai-launch's stdout and
stderr, each worker line prefixed with `[rankN]: `.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import TextIO

import structlog

_events_path: Path | None = None


def record_events_to(path: Path | None) -> None:
    """From now on also append every log event to `path` as one JSON line (None: stop)."""
    global _events_path
    _events_path = path


def _append_event(logger, method_name: str, event_dict: dict) -> dict:
    """A structlog processor: the run's event history, kept in the save folder whatever the console shows."""
    if _events_path is not None:
        record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z", "level": method_name, **event_dict}
        try:
            with open(_events_path, "a") as handle:
                handle.write(json.dumps(record, default=str) + "\n")
        except OSError:
            pass  # the save folder's health is checked elsewhere; logging must not fail the run
    return event_dict


def wants_json(log_format: str, stream: TextIO) -> bool:
    if log_format == "json":
        return True
    if log_format == "console":
        return False
    return not stream.isatty()


def configure(log_format: str = "auto", stream: TextIO | None = None) -> structlog.typing.FilteringBoundLogger:
    stream = stream or sys.stderr
    if wants_json(log_format, stream):
        renderer: structlog.typing.Processor = structlog.processors.JSONRenderer()
        timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty(), pad_event_to=22)
        timestamper = structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            _append_event,
            structlog.processors.add_log_level,
            timestamper,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    return structlog.get_logger("pai-launch")
