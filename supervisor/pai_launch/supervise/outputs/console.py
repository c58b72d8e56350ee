"""pai-launch's console (stdin, stdout, stderr) may be closed at start or go away mid-run: a closed terminal, a pipe
whose reader quit, a full disk. None of that may end a run that has its events file as its record.

`hold_std_fds()` puts /dev/null in place of a closed fd 0, 1 or 2 before anything is opened, so no pipe or file of
ours lands there and every child inherits valid fds. `install()` replaces sys.stdout and sys.stderr with
`DroppingStream`s: each line goes to the fd in one write, and one that fails is dropped; each stream's first failure is
told
once to whoever `watch()`es (the run writes `console_lost` into its events file).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

#: Hears (stream name, error) once per stream, on its first failed write.
Listener = Callable[[str, str], None]

_lock = threading.Lock()
_lost: dict[str, str] = {}
_listener: Listener | None = None


def hold_std_fds() -> None:
    """/dev/null in place of each of fds 0, 1, 2 that is closed; sys.stdin/stdout/stderr made again where Python
    started without them (None)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:  # lower fds are open by now, so it lands on fd unless another thread took it
                os.dup2(null, fd)
                os.close(null)
            os.set_inheritable(fd, True)  # os.open's fds are not: the children must get it
    if sys.stdin is None:
        sys.stdin = open(0, "r", closefd=False)
    for name, fd in (("stdout", 1), ("stderr", 2)):
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "w", closefd=False, encoding="utf-8", errors="backslashreplace"))


def install() -> None:
    """Our stdout and stderr from now on: writes that fail are dropped (see `DroppingStream`)."""
    hold_std_fds()
    for name, fd in (("stdout", 1), ("stderr", 2)):
        current = getattr(sys, name)
        if not isinstance(current, DroppingStream):
            try:
                current.flush()
            except (OSError, ValueError):
                pass
            setattr(sys, name, DroppingStream(name, fd, getattr(current, "encoding", None) or "utf-8"))


def watch(listener: Listener | None) -> None:
    """`listener` hears each stream's first failure (at once for one that failed already); None: nobody does."""
    global _listener
    with _lock:
        _listener = listener
        known = dict(_lost)
    if listener is not None:
        for name, error in known.items():
            listener(name, error)


def lost() -> dict[str, str]:
    """Stream name -> its first failure, for the streams that failed so far."""
    with _lock:
        return dict(_lost)


def _failed(name: str, exc: BaseException) -> None:
    with _lock:
        if name in _lost:
            return
        _lost[name] = error = f"{type(exc).__name__}: {exc}"
        listener = _listener
    if listener is not None:
        try:
            listener(name, error)
        except Exception:  # noqa: BLE001 - the record is a courtesy; the run goes on
            pass


def write_fd(name: str, fd: int, data: bytes) -> None:
    """All of `data` to `fd`, or as much as it takes before a write fails (then dropped, the failure noted once)."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        _failed(name, exc)


class _DroppingBuffer:
    """The binary side of a DroppingStream (`sys.stdout.buffer`), for the workers' bytes."""

    def __init__(self, name: str, fd: int) -> None:
        self._name, self._fd = name, fd

    def write(self, data: bytes) -> int:
        write_fd(self._name, self._fd, bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return _isatty(self._fd)


class DroppingStream:
    """A text stream on `fd` that never raises on write, a failed write dropped and its first failure noted.

    Line-buffered: print()'s message and its newline go out in one write, so a worker's line written meanwhile
    (through `buffer`) never lands inside a log line; nothing is held past a newline or a flush, so nothing is left
    to fail again at exit."""

    errors = "backslashreplace"

    def __init__(self, name: str, fd: int, encoding: str = "utf-8") -> None:
        self.name, self.encoding = name, encoding
        self._fd = fd
        self._lock = threading.Lock()
        self._pending = ""
        self.buffer = _DroppingBuffer(name, fd)

    def write(self, text: str) -> int:
        with self._lock:
            head, newline, rest = (self._pending + text).rpartition("\n")
            if not newline:
                self._pending = rest
                return len(text)
            self._pending = rest
            write_fd(self.name, self._fd, (head + newline).encode(self.encoding, self.errors))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            text, self._pending = self._pending, ""
            if text:
                write_fd(self.name, self._fd, text.encode(self.encoding, self.errors))

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return _isatty(self._fd)

    def writable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return False


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
