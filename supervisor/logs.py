"""structlog set-up: readable lines on a terminal, JSON lines for systemd, Slurm and Docker.

pai-launch's own lines go to stderr. The training processes' stdout and stderr go to pai-launch's stdout and
stderr, each worker line prefixed with `[rankN]: `.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog


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
            structlog.processors.add_log_level,
            timestamper,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    return structlog.get_logger("pai-launch")
