"""The save folder's lock file: an exclusive flock on SAVE/.pai-launch/lock.node<R> (R: the node rank), holding the
holder's PID, released by the kernel however its holder dies.

Seen by every machine that shares the folder (NFS, a volume mounted into several containers). The file is the running
user's, mode 0600, opened relative to the checked folder (statedir) and never through a symbolic link, so no other
user can lock it, and a planted link or another user's file is refused (exit 2) before anything is written. A refusal
names a PID only when the kernel shows that process holding the lock (in /proc/locks).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from pai_launch.savefmt import statedir
from pai_launch.savefmt.record import STATE_DIR, StateError


def lock_file(node: int) -> str:
    return f"lock.node{node}"


class LockHeld(StateError):
    """Another live pai-launch holds the save folder; the message names its PID."""

    @classmethod
    def by(cls, save_dir: Path, holder: str) -> LockHeld:
        """Held by the pai-launch with PID `holder`, as the kernel shows."""
        return cls(f"another pai-launch (PID {holder}) is running on {save_dir}: wait for it or stop it")


def flock_holders(proc_locks: str, device: int, inode: int) -> list[int]:
    """PIDs holding an flock on (device, inode), from /proc/locks' text ("1: FLOCK ADVISORY WRITE 15005 fe:00:2146539 0
    EOF")."""
    want = f"{os.major(device):02x}:{os.minor(device):02x}:{inode}"
    pids = []
    for line in proc_locks.splitlines():
        parts = line.split()
        if "->" in parts:  # a waiter, not a holder
            continue
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == want and parts[4].isdigit():
            pids.append(int(parts[4]))
    return pids


def held_message(save_dir: Path, lock_path: Path, written: str, holders: list[int] | None) -> str:
    """Why the flock was refused (pure). `written`: the PID the file holds; `holders`: the PIDs /proc/locks shows
    holding
    it (None: /proc/locks could not be read). A PID is named as the holder only when the kernel shows it holding."""
    visible = [pid for pid in holders or [] if pid > 0]
    if written.isdigit() and int(written) in visible:
        return str(LockHeld.by(save_dir, written))
    if visible:
        return (f"another process (PID {visible[0]}) holds the lock file {lock_path}, which names "
                f"{'PID ' + written if written else 'no PID'}: wait for it or stop it")
    names = f" (the file names PID {written})" if written else ""
    if holders is None:
        return f"another process holds the lock file {lock_path}{names}: wait for it or stop it"
    return (f"another pai-launch holds the lock file {lock_path}{names} from another machine or container sharing "
            f"{save_dir}: wait for it or stop it")


def _proc_locks() -> str | None:
    try:
        with open("/proc/locks") as handle:
            return handle.read()
    except OSError:
        return None


class FolderLock:
    """An exclusive flock on SAVE/.pai-launch/lock.node<R>, holding the holder's PID for error messages."""

    def __init__(self, save_dir: Path, node: int = 0) -> None:
        self.save_dir = save_dir
        self.path = save_dir / STATE_DIR / lock_file(node)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Create, lock and write the lock file; a lock held before (read-only, or on a file since removed) is let go
        first, since a second flock of ours on the same file would be refused."""
        self.release()
        folder = statedir.open_state_dir(self.save_dir, create=True)
        try:
            fd = self._open(folder, os.O_RDWR | os.O_CREAT)
        finally:
            os.close(folder)
        fd = self._lock(fd)
        os.fchmod(fd, 0o600)  # one left by an older pai-launch was 0644: anyone could have locked it
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def acquire_if_present(self) -> None:
        """Take the lock without creating or writing anything (when there is a lock file at all)."""
        folder = statedir.open_state_dir(self.save_dir, create=False)
        if folder is None:
            return
        try:
            fd = self._open(folder, os.O_RDONLY)
        except FileNotFoundError:
            return
        finally:
            os.close(folder)
        self._fd = self._lock(fd)

    def _open(self, folder: int, flags: int) -> int:
        """The lock file opened in `folder` (a descriptor), never through a link, and only when it is ours."""
        try:
            fd = os.open(self.path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600,
                         dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise statedir.UnsafeStateDir(f"{self.path} is a symbolic link: pai-launch never follows links there; "
                                              "remove it and start again") from None
            raise
        try:
            why = statedir.problem(self.path, os.fstat(fd), os.geteuid(), want_dir=False)
        except BaseException:
            os.close(fd)
            raise
        if why:
            os.close(fd)
            raise statedir.UnsafeStateDir(why)
        return fd

    def _lock(self, fd: int) -> int:
        """flock `fd`, or close it and raise LockHeld naming the holder the kernel shows."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            written = os.pread(fd, 64, 0).decode(errors="replace").strip()
            written = written if written.isdigit() else ""  # only ever a PID; anything else is not repeated
            st = os.fstat(fd)
            os.close(fd)
            text = _proc_locks()
            holders = None if text is None else flock_holders(text, st.st_dev, st.st_ino)
            raise LockHeld(held_message(self.save_dir, self.path, written, holders)) from None
        return fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

