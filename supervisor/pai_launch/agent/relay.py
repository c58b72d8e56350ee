"""Relay the workers' per-rank log files to the agent's stdout/stderr, each line prefixed with its rank.

torch writes each rank's output to files (so failures can show a log tail); this thread tails them.
Unlike torch's own tee it can be drained on demand, so the agent may leave the moment the workers
have exited without losing their last lines.

A script may print faster than anything can relay, so the relay reads in bounded chunks (its memory does not grow
with the backlog), labels a chunk's lines with one `bytes.replace` and writes it in one call. A rank more than
`Limits.max_lag` behind is skipped ahead to its newest lines, with one line saying how much was skipped; the final
drain, which the generation's result waits for, is bounded in time the same way: what it cannot relay within
`Limits.final_drain` seconds is skipped, keeping each rank's last lines. The failure log tail reads torch's files
themselves, so it always shows the true last lines.

Each line starts with its rank's head: pai-launch's label and ": " (`[rank3]: `), or torchrun's
--log-line-prefix-template rendered for the rank (wire.lineprefix), as exactly as torch's own console copy has it.
A line gets one rank label: torch's own exception hook already starts a worker's traceback lines with `[rankN]: `
(and a script may print the same), so under a head of that form such a line is not labelled twice (`prefixed`);
any other head is put before every line as it is.
"""

from __future__ import annotations

import glob
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

INTERVAL = 0.05
_STREAMS = {"stdout.log": "stdout", "stderr.log": "stderr"}


@dataclass(frozen=True)
class Limits:
    """How the relay bounds its memory and its lag."""

    #: One read from a rank's file.
    chunk: int = 1 << 20
    #: Most read from one file in one pass over the files, so a flooding rank does not starve the others.
    turn: int = 8 << 20
    #: Further behind than this, a rank is skipped ahead to its newest `tail` bytes.
    max_lag: int = 64 << 20
    #: What is kept of a stretch that is skipped: its last lines.
    tail: int = 64 << 10
    #: A line longer than this is written in pieces (a partial line is never held beyond it).
    long_line: int = 1 << 20
    #: Seconds the final drain may take before it skips to each rank's last lines.
    final_drain: float = 1.5


def prefixed(head: bytes, line: bytes) -> bytes:
    """`line` under the rank's `head` (`[rank3]: `, `[rank3 node1]: `, a rendered template). Under a label's head
    (`[...]: `), once: a line that already starts with the head, or with torch's `[rank3]: ` for the same rank, is not
    labelled again (torch's shorter prefix gives way to the label, which names the node); another rank's prefix is
    part of the line. Any other head goes before every line."""
    if not _is_label(head):
        return head + line
    if line.startswith(head):
        return line
    own = _torch_prefix(head)
    if own is not None and line.startswith(own):
        line = line[len(own):]
    return head + line


def _is_label(head: bytes) -> bool:
    return head.startswith(b"[") and head.endswith(b"]: ")


def _torch_prefix(head: bytes) -> bytes | None:
    """torch's `[rankN]: ` for the rank a label's head (`[rankN]: `, `[rankN node1]: `) names; None for a head
    that names no global rank that way."""
    if not _is_label(head):
        return None
    rank = head[1:-3].split(b" ", 1)[0]
    if rank.startswith(b"rank") and rank[4:].isascii() and rank[4:].isdigit():
        return b"[" + rank + b"]: "
    return None


def label_lines(head: bytes, data: bytes) -> list[bytes | memoryview]:
    """Complete lines `data` (ending in b"\\n") each under `head`, as pieces to write in turn: one replace for the
    whole chunk (no copy beyond it), line by line only where a line may already carry a rank label."""
    if not data:
        return []
    if _is_label(head):
        own = _torch_prefix(head)
        mark = os.path.commonprefix([head, own]) if own is not None else head  # what both begin with
        if data.startswith(mark) or (b"\n" + mark) in data:
            return [b"".join(prefixed(head, line) + b"\n" for line in data[:-1].split(b"\n"))]
    replaced = data.replace(b"\n", b"\n" + head)  # each line's end and the next one's head; the last head goes
    return [head, memoryview(replaced)[:len(replaced) - len(head)]]


def split_lines(partial: bytes, data: bytes, long_line: int) -> tuple[bytes, bytes]:
    """(complete lines ending in b"\\n", the unterminated rest) of `partial + data`; a rest longer than `long_line`
    is given out as a line of its own, so it is never held beyond that."""
    end = data.rfind(b"\n")
    if end < 0:
        rest = partial + data
        if len(rest) > long_line:
            return rest + b"\n", b""
        return b"", rest
    rest = data[end + 1:]
    if len(rest) > long_line:
        return partial + data + b"\n", b""
    return partial + data[:end + 1], rest


def skipped_note(head: bytes, stream: str, skipped_bytes: int, skipped_lines: int) -> bytes:
    """The one line that says what a rank's relayed stream leaves out."""
    return (head + f"pai-launch: skipped {skipped_bytes} bytes ({skipped_lines} lines) of this rank's "
            f"{stream} to keep up (all of it is in its log file); the lines below are its newest".encode() + b"\n")


class _Tailed:
    """One rank's log file as far as it was relayed."""

    def __init__(self, path: str, stream: str, head: bytes) -> None:
        self.path, self.stream, self.head = path, stream, head
        self.fd: int | None = None
        self.offset = 0
        self.partial = b""
        self.skipped_bytes = 0
        self.skipped_lines = 0

    def size(self) -> int:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return os.fstat(self.fd).st_size

    def read(self, count: int) -> bytes:
        assert self.fd is not None
        data = os.pread(self.fd, count, self.offset)
        self.offset += len(data)
        return data

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class LogRelay:
    def __init__(self, log_dir: str, sinks: dict[str, BinaryIO] | None = None,
                 head: Callable[[int], str] = lambda local_rank: f"[rank{local_rank}]: ", limits: Limits = Limits(),
                 muted: tuple[tuple[int, str], ...] = ()) -> None:
        """`sinks` maps "stdout"/"stderr" to where that stream's lines go (default: this process's own); `head` is
        what starts each line of a local rank; `muted` (local rank, stream) pairs are left in their files, never
        relayed."""
        self._head = head
        self._muted = frozenset(muted)
        self._pattern = os.path.join(log_dir, "**", "attempt_*", "*", "std*.log")
        self._sinks = sinks
        self.limits = limits
        self._files: dict[str, _Tailed] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._deadline = float("inf")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-relay", daemon=True)

    def start(self) -> LogRelay:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.drain():
                self._stop.wait(INTERVAL)
        self._finish()

    @property
    def skipped(self) -> dict[str, tuple[int, int]]:
        """path -> (bytes, lines) left out so far, for the files that lost any."""
        files = list(self._files.items())  # one step under the GIL: the thread may add a file meanwhile
        return {path: (f.skipped_bytes, f.skipped_lines) for path, f in files if f.skipped_bytes}

    def drain(self, *, final: bool = False, deadline: float = float("inf")) -> bool:
        """Relay up to one turn of new lines from every file (when final, also any unterminated rest); whether some
        file still has more to relay. After the final drain, nothing."""
        with self._lock:
            if self._done.is_set():
                return False
            behind = False
            for tailed in self._discover():
                behind = self._pump(tailed, final, deadline) or behind
            return behind

    def _discover(self) -> list[_Tailed]:
        for path in sorted(glob.glob(self._pattern, recursive=True)):
            name = os.path.basename(path)
            local_rank = os.path.basename(os.path.dirname(path))
            if path in self._files or name not in _STREAMS or not local_rank.isdigit():
                continue
            if (int(local_rank), _STREAMS[name]) in self._muted:
                continue
            self._files[path] = _Tailed(path, _STREAMS[name], self._head(int(local_rank)).encode())
        return list(self._files.values())

    def _sink(self, stream: str) -> BinaryIO:
        return self._sinks[stream] if self._sinks is not None else getattr(sys, stream).buffer

    def _pump(self, tailed: _Tailed, final: bool, deadline: float) -> bool:
        """One turn of `tailed`: skip ahead if it is too far behind or the deadline passed, then relay; whether
        more is left."""
        limits = self.limits
        try:
            size = tailed.size()
            if size - tailed.offset > limits.max_lag or (time.monotonic() >= deadline and size > tailed.offset):
                self._skip_to_tail(tailed, size)
            budget = limits.turn
            while budget > 0 and tailed.offset < size:
                data = tailed.read(min(limits.chunk, budget, size - tailed.offset))
                if not data:
                    break
                budget -= len(data)
                lines, tailed.partial = split_lines(tailed.partial, data, limits.long_line)
                self._write(tailed.stream, *label_lines(tailed.head, lines))
                if time.monotonic() >= deadline:
                    break
        except OSError:
            return False
        if final and tailed.offset >= size and tailed.partial:
            self._write(tailed.stream, *label_lines(tailed.head, tailed.partial + b"\n"))
            tailed.partial = b""
        return tailed.offset < size

    def _skip_to_tail(self, tailed: _Tailed, size: int) -> None:
        """Leave out all but the newest lines of `tailed` (counted), and say so once in its stream."""
        start = size - self.limits.tail
        if start <= tailed.offset:
            return
        skipped_bytes, skipped_lines, last = len(tailed.partial), 0, tailed.partial[-1:]
        while tailed.offset < start:
            data = tailed.read(min(self.limits.chunk, start - tailed.offset))
            if not data:
                break
            skipped_bytes += len(data)
            skipped_lines += data.count(b"\n")
            last = data[-1:]
        if last != b"\n":  # the tail begins inside a line whose start was skipped: the rest of it goes too
            head = tailed.read(min(self.limits.long_line, size - tailed.offset))
            cut = head.find(b"\n")
            if cut >= 0:
                skipped_bytes, skipped_lines = skipped_bytes + cut + 1, skipped_lines + 1
                tailed.offset -= len(head) - cut - 1
            else:
                skipped_bytes += len(head)
        tailed.partial = b""
        tailed.skipped_bytes += skipped_bytes
        tailed.skipped_lines += skipped_lines
        self._write(tailed.stream, skipped_note(tailed.head, tailed.stream, skipped_bytes, skipped_lines))

    def _write(self, stream: str, *pieces: bytes | memoryview) -> None:
        if not pieces:
            return
        try:
            sink = self._sink(stream)
            for piece in pieces:
                sink.write(piece)
            sink.flush()
        except (OSError, ValueError):
            pass

    def _finish(self) -> None:
        """The final drain: everything, unless the deadline comes first; then each rank's last lines."""
        try:
            while time.monotonic() < self._deadline and self.drain(deadline=self._deadline):
                pass
            self.drain(final=True, deadline=self._deadline)
            with self._lock:
                for tailed in self._files.values():
                    tailed.close()
        finally:
            self._done.set()

    def stop(self, within: float | None = None) -> None:
        """Stop the thread and copy what is left, taking at most about `within` seconds (Limits.final_drain): the
        generation's result waits for this."""
        within = self.limits.final_drain if within is None else within
        self._deadline = time.monotonic() + within
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            # A sink that blocks (a full pipe) must not hold the result: the thread goes on by itself.
            self._done.wait(within + 1.0)
        elif not self._done.is_set():
            self._finish()
