"""One live status line under the log lines, on a terminal: generation, dendrites, elapsed, last event, best score.

Everything that reaches the terminal while the line is shown (pai-launch's log lines, the workers' output when
stdout is the same terminal) goes through `LiveLine`, which takes the line away, writes, and draws it again, so
nothing is written over. Off (None) when stderr is not a terminal or the log format is JSON: services, Slurm and
containers get plain lines.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from pai_launch.wire import log_events

#: Erase the terminal's current line.
CLEAR = "\r\x1b[K"
#: How often the elapsed time is redrawn.
REDRAW_INTERVAL = 1.0

class LiveLine:
    def __init__(self, err: TextIO, out: TextIO) -> None:
        self._err, self._out = err, out
        self._out_shared = out.isatty()
        self._lock = threading.RLock()
        self._text = ""
        self._shown = False

    def set(self, text: str) -> None:
        with self._lock:
            self._text = text
            self._clear()
            self._draw()

    def write_line(self, line: str) -> None:
        """A whole line (ending in a newline) for stderr."""
        with self._lock:
            self._clear()
            self._err.write(line)
            self._err.flush()
            self._draw()

    def write_output(self, stream: str, data: bytes) -> None:
        """A worker's whole line(s), for pai-launch's stdout or stderr."""
        target = self._out if stream == "stdout" else self._err
        with self._lock:
            if target is self._err or self._out_shared:
                self._clear()
            try:
                target.buffer.write(data)
                target.flush()
            except (OSError, ValueError):
                pass
            self._draw()

    def close(self) -> None:
        with self._lock:
            self._clear()
            self._text = ""

    def _clear(self) -> None:
        if self._shown:
            self._err.write(CLEAR)
            self._err.flush()
            self._shown = False

    def _draw(self) -> None:
        if not self._text:
            return
        width = shutil.get_terminal_size((100, 24)).columns
        text = self._text if len(self._text) < width else self._text[:max(1, width - 2)] + "…"
        self._err.write(text)
        self._err.flush()
        self._shown = True


class LineStream:
    """A file for structlog's PrintLogger: its writes (print writes the message, then the newline) are gathered into
    whole messages before they reach the terminal, so a message of several lines is written at once, the status line
    drawn below its last line."""

    def __init__(self, live: LiveLine) -> None:
        self._live = live
        self._pending = threading.local()

    def write(self, text: str) -> int:
        pending = getattr(self._pending, "text", "") + text
        if pending.endswith("\n"):
            self._live.write_line(pending)
            pending = ""
        self._pending.text = pending
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


class StatusFeed:
    """A structlog processor: the status line follows the run's events; a thread redraws it as time passes.

    `folder_facts()` returns (dendrites, best score or None) from the save folder, read when a generation
    starts or ends (not on every redraw)."""

    def __init__(self, live: LiveLine, folder_facts: Callable[[], tuple[int, float | None]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._live, self._facts, self._clock = live, folder_facts, clock
        self._started = clock()
        self.generation: int | None = None
        self.last_event = "starting"
        self.dendrites = 0
        self.best: float | None = None
        self._stop = threading.Event()
        threading.Thread(target=self._tick, name="live-line", daemon=True).start()

    def __call__(self, logger: Any, method_name: str, event_dict: dict) -> dict:
        try:
            self.observe(event_dict)
        except Exception:  # noqa: BLE001 - the status line must never fail the run's logging
            pass
        return event_dict

    def observe(self, event: dict) -> None:
        name = str(event.get("event", ""))
        self.last_event = name
        if name == log_events.INIT_STARTED:
            self.generation = 0
        elif name == log_events.RUN_STARTED:  # generation: the last one a resumed run had reached (0: none yet)
            self.generation = event.get("generation") or None
        elif "generation" in event and isinstance(event["generation"], int):
            self.generation = event["generation"]
        if name in (log_events.RUN_STARTED, log_events.GENERATION_STARTED, log_events.GENERATION_ENDED,
                    log_events.GENERATION_FAILED, log_events.GENERATION_STOPPED,
                    log_events.COMPLETION_MARKER_SEEN, log_events.RESTRUCTURED_IN_PROCESS):
            self.dendrites, self.best = self._facts()
        self._live.set(self.text())

    def text(self) -> str:
        elapsed = int(self._clock() - self._started)
        hours, rest = divmod(elapsed, 3600)
        generation = "init run" if self.generation == 0 else f"generation {self.generation}" if self.generation \
            else "starting"
        parts = [generation, f"{self.dendrites} dendrite{'s' if self.dendrites != 1 else ''}",
                 f"{hours}:{rest // 60:02d}:{rest % 60:02d}", self.last_event]
        if self.best is not None:
            parts.append(f"best {self.best:.6g}")
        return "[pai-launch] " + " · ".join(parts)

    def _tick(self) -> None:
        while not self._stop.wait(REDRAW_INTERVAL):
            self._live.set(self.text())

    def close(self) -> None:
        self._stop.set()


def open_live_line(err: TextIO | None = None, out: TextIO | None = None) -> LiveLine:
    """The line, on our stderr and stdout as they are now (console.install() has made them safe to write). The
    run's children relay their output through it (passthrough.py writes there), so it is never torn by their lines."""
    return LiveLine(err or sys.stderr, out or sys.stdout)
