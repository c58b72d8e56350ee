"""Replace a file atomically: readers (another process, another machine on a shared folder) see the old file or
the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes, *, mode: int = 0o644, durable: bool = False) -> None:
    """`data` into a temp file beside `path`, renamed over it. `mode`: mkstemp's 0600 would hide the file from
    other users of a shared folder. `durable`: fsync the file and the folder, so the rename survives a crash.
    OSError (the folder is gone or read-only) goes to the caller, and no temp file is left behind."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    if durable:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
