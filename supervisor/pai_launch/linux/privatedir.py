"""A run's private folders in the shared temporary folder, and which of them a new pai-launch may remove.

Whether a folder is abandoned is decided by a lock its owner holds, never by a pid: a pid means nothing to a
pai-launch in another PID namespace or container that shares /tmp, and such a pid check once removed the folders of
every live run on the host. The owner makes the folder, creates a lock file in it under a temporary name, takes an
exclusive flock on it and only then renames it into place: a folder's LOCK_NAME is never seen unlocked while its
owner lives. The lock lives as long as the owner's open file description (O_CLOEXEC: no exec'd child holds it, so
it goes with the owner, even by SIGKILL; a child forked without exec shares it, which can only keep the folder
longer); flock locks work across PID namespaces and containers on one file system.

A sweep removes a folder only when it can take that lock itself. A folder without a lock file is kept: it was made
by an older pai-launch (which could only tell by pid) or is being made right now, and the system's own temporary
folder cleaning is there for it. Folders of other users and symbolic links are never touched.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pai_launch.savefmt import safeopen
from pai_launch.wire import failure_causes

#: Every private folder pai-launch makes in the temporary folder is named PREFIX<pid>-<random> (the pid for people).
PREFIX = failure_causes.PRIVATE_FOLDER_PREFIX
LOCK_NAME = ".pai-launch.lock"
#: Added to a launcher error when one of the run's private paths is gone (outcomes: a fault a retry can fix).
LOST_NOTE = failure_causes.LOST_NOTE


@dataclass
class PrivateDir:
    """A folder of ours, locked for as long as we hold `lock_fd`."""

    path: Path
    lock_fd: int

    def remove(self) -> None:
        """Remove the folder, then let the lock go (in that order: no sweep can take a half-removed folder)."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.release()

    def release(self) -> None:
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


def create(prefix: str, base: str | None = None) -> PrivateDir:
    """A new folder PREFIX* in `base` (default: the temporary folder), locked before its lock file shows."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    pending = path / f"{LOCK_NAME}.new"
    fd = os.open(pending, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file nobody else has opened yet: never refused
    except OSError:  # a file system without flock: no lock file, so no sweep ever removes the folder
        os.close(fd)
        os.unlink(pending)
        return PrivateDir(path, -1)
    try:
        os.rename(pending, path / LOCK_NAME)
    except BaseException:
        os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        raise
    return PrivateDir(path, fd)


def candidates(bases: Iterable[str], prefix: str) -> list[Path]:
    """Folders named PREFIX* in each base: our own (same user), not symbolic links."""
    found = set()
    for base in set(bases):
        for path in Path(base).glob(f"{prefix}*"):
            try:
                st = path.lstat()
            except OSError:
                continue
            if path.is_dir() and not path.is_symlink() and st.st_uid == os.getuid():
                found.add(path)
    return sorted(found)


def take_abandoned(folder: Path) -> int | None:
    """The folder's lock, taken (its fd), if the folder has one and no live process holds it; else None."""
    try:
        fd = safeopen.open_fd(folder / LOCK_NAME)  # a pipe in its place must not block the sweep
    except OSError:
        return None  # no lock file (older pai-launch, or being made) or not ours to open: kept
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None  # its owner (or another sweep) holds it
    return fd


def remove_abandoned(bases: Iterable[str], prefix: str = PREFIX) -> list[Path]:
    """Remove every PREFIX* folder in `bases` whose owner is gone (its lock taken here); the folders removed."""
    removed = []
    for folder in candidates(bases, prefix):
        fd = take_abandoned(folder)
        if fd is None:
            continue
        try:
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(fd)
        removed.append(folder)
    return removed


def with_lost_note(error: str, paths: Iterable[str | os.PathLike | None]) -> str:
    """`error`, saying which of the run's private `paths` is gone if one is (why the launcher failed)."""
    gone = [str(path) for path in paths if path and not os.path.lexists(path)]
    return f"{error} ({LOST_NOTE}: {gone[0]})" if gone else error

