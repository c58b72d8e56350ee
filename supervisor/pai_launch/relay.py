"""Relay the workers' per-rank log files to the agent's stdout/stderr, each line prefixed with its rank.

torch writes each rank's output to files (so failures can show a log tail); this thread tails them.
Unlike torch's own tee it can be drained on demand, so the agent may leave the moment the workers
have exited without losing their last lines.

A line gets one rank prefix: torch's own exception hook already starts a worker's traceback lines with
`[rankN]: ` (and a script may print the same), so such a line is not labelled twice (`prefixed`).
"""

from __future__ import annotations

import glob
import os
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

INTERVAL = 0.05
_STREAMS = {"stdout.log": "stdout", "stderr.log": "stderr"}


def prefixed(label: bytes, line: bytes) -> bytes:
    """`line` under the rank's `label` (`[rank3]`, `[rank3 node1]`), once: a line that already starts with that label,
    or with torch's `[rank3]: ` for the same rank, is not labelled again (torch's shorter prefix gives way to the
    label, which names the node); another rank's prefix is part of the line."""
    if line.startswith(label + b": "):
        return line
    rank = label[1:].split(b" ", 1)[0].rstrip(b"]")
    if rank.startswith(b"rank") and rank[4:].isdigit():
        own = b"[" + rank + b"]: "
        if line.startswith(own):
            line = line[len(own):]
    return label + b": " + line


class LogRelay:
    def __init__(self, log_dir: str, sinks: dict[str, BinaryIO] | None = None,
                 label: Callable[[int], str] = lambda local_rank: f"[rank{local_rank}]") -> None:
        """`sinks` maps "stdout"/"stderr" to where that stream's lines go (default: this process's own); `label` names
        a local rank in the prefix."""
        self._label = label
        self._pattern = os.path.join(log_dir, "**", "attempt_*", "*", "std*.log")
        self._sinks = sinks
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-relay", daemon=True)

    def start(self) -> LogRelay:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            self.drain()

    def drain(self, *, final: bool = False) -> None:
        """Copy every complete new line (and, when final, any unterminated rest) to our own streams."""
        with self._lock:
            for path in sorted(glob.glob(self._pattern, recursive=True)):
                name = os.path.basename(path)
                if name not in _STREAMS:
                    continue
                local_rank = os.path.basename(os.path.dirname(path))
                if not local_rank.isdigit():
                    continue
                stream = _STREAMS[name]
                sink = self._sinks[stream] if self._sinks is not None else getattr(sys, stream).buffer
                self._copy(path, self._label(int(local_rank)).encode(), sink, final)

    def _copy(self, path: str, label: bytes, sink: BinaryIO, final: bool) -> None:
        try:
            with open(path, "rb") as handle:
                handle.seek(self._offsets.get(path, 0))
                data = handle.read()
        except OSError:
            return
        if not data and not (final and self._partial.get(path)):
            return
        self._offsets[path] = self._offsets.get(path, 0) + len(data)
        data = self._partial.pop(path, b"") + data
        lines = data.split(b"\n")
        rest = lines.pop()
        if final and rest:
            lines.append(rest)
        elif rest:
            self._partial[path] = rest
        if lines:
            try:
                sink.write(b"".join(prefixed(label, line) + b"\n" for line in lines))
                sink.flush()
            except (OSError, ValueError):
                pass

    def stop(self) -> None:
        """Stop the thread and copy what is left."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=1)
        self.drain(final=True)
