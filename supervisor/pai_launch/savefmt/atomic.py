"""Replace a file atomically: readers (another process, another machine on a shared folder) see the old file or
the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pai_launch.savefmt.safeopen import umask


def write_atomically(path: Path, data: bytes, *, mode: int | None = None, durable: bool = False) -> None:
    """`data` into a temp file beside `path`, renamed over it. `mode` (default: 0666 less the umask, as open() would
    make it): mkstemp's 0600 would hide the file from the other users of a shared folder that the umask lets read it.
    `durable`: fsync the file and the folder, so the rename survives a crash.
    OSError (the folder is gone or read-only) goes to the caller, and no temp file is left behind."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~umask() if mode is None else mode)
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
