"""Opening pai-launch's own files (SAVE/.pai-launch, the adoption record, private folders) without trusting what is
there: anyone who can write the folder can leave a named pipe, a socket, a directory or a symbolic link in place of
a file. A plain open() of a pipe blocks until a writer comes (signals then wait with it), and a link would send our
writes elsewhere. So: never follow a link, open without blocking, refuse anything but a regular file, and read no
more than a bound.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import IO

#: The most of state.json (or another small record of ours) that is read; a real one is a few hundred bytes.
MAX_RECORD = 16 * 1024 * 1024


class WrongKind(OSError):
    """Something other than a regular file is where pai-launch keeps a file of its own."""

    def __init__(self, path: os.PathLike | str, kind: str, expected: str = "a regular file") -> None:
        self.kind, self.expected = kind, expected
        super().__init__(errno.EINVAL, f"is {kind}, not {expected}", str(path))

    def __str__(self) -> str:
        what = "file" if self.expected == "a regular file" else "folder"
        return (f"{self.filename} is {self.kind}, not {self.expected}: pai-launch keeps its own {what} there; "
                "move it aside (or remove it) and start again")


class TooLarge(OSError):
    """A file of ours larger than any real one: refused before it is read."""

    def __init__(self, path: os.PathLike | str, size: int, limit: int) -> None:
        self.size, self.limit = size, limit
        super().__init__(errno.EFBIG, f"is {size} bytes, more than the {limit} bytes it can be", str(path))

    def __str__(self) -> str:
        return f"{self.filename} is {self.size} bytes, more than the {self.limit} bytes it can be"


def kind_of(mode: int) -> str:
    """What an st_mode is, in words (pure)."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else "not a file"


def wrong_kind(path: os.PathLike | str) -> WrongKind | None:
    """The WrongKind error for `path` when something other than a regular file is there (a link is not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else WrongKind(path, kind_of(mode))


def open_fd(path: os.PathLike | str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
    """os.open of a regular file only: no link followed, no block on a pipe (O_NONBLOCK, cleared once it is known to be
    a file), close-on-exec. WrongKind for anything else; other OSErrors (missing, no permission) as they are."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP, errno.ENODEV):
            raise wrong_kind(path) or exc from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise WrongKind(path, kind_of(st.st_mode))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: os.PathLike | str, limit: int = MAX_RECORD) -> bytes:
    """The whole of a regular file of at most `limit` bytes; TooLarge (before reading) for a larger one."""
    fd = open_fd(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise TooLarge(path, size, limit)
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:  # it grew while being read
        raise TooLarge(path, len(data), limit)
    return data


def open_append(path: os.PathLike | str) -> IO[str]:
    """A text handle like open(path, "a+") (made if absent, with the umask's mode), for a regular file only."""
    return os.fdopen(open_fd(path, os.O_RDWR | os.O_APPEND | os.O_CREAT), "a+", encoding="utf-8")


def real_folder(path: Path) -> None:
    """WrongKind unless `path` is a directory itself, not a link to one (a folder of ours we are about to write in)."""
    mode = os.lstat(path).st_mode
    if not stat.S_ISDIR(mode):
        raise WrongKind(path, kind_of(mode), expected="a directory")


def umask() -> int:
    """The process's umask, read without changing it where the system says (Linux 4.7+), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current
