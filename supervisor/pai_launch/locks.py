"""One pai-launch per save folder: two locks, both released by the kernel however their holder dies.

- An flock on SAVE/.pai-launch/lock.node<R> (R: the node rank), holding the holder's PID: seen by every machine that
  shares the folder (NFS, a volume mounted into several containers).
- An abstract unix socket named after the folder's absolute path: seen on this machine only, but it
  does not live in the folder, so a save folder that was removed and re-created cannot be taken by a
  second pai-launch while the first is still stopping its workers. Its holder's PID comes from the
  kernel (SO_PEERCRED), so nothing has to be written anywhere.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import struct
from pathlib import Path

from pai_launch.record import STATE_DIR, StateError

def lock_file(node: int) -> str:
    return f"lock.node{node}"


class LockHeld(StateError):
    """Another live pai-launch holds the save folder; the message names its PID."""


def _held(save_dir: Path, holder: str) -> LockHeld:
    return LockHeld(f"another pai-launch (PID {holder}) is running on {save_dir}: wait for it or stop it")


class PathLock:
    """A listening abstract socket whose name is derived from the save folder's absolute path."""

    def __init__(self, save_dir: Path, node: int = 0) -> None:
        self.save_dir = save_dir
        digest = hashlib.sha256(os.fsencode(os.path.realpath(save_dir))).hexdigest()[:40]
        suffix = "" if node == 0 else f"/node{node}"  # several nodes of one job may share a machine
        self.address = f"\0pai-launch/save-folder/{digest}{suffix}"
        self._socket: socket.socket | None = None

    def acquire(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(self.address)
        except OSError:
            sock.close()
            raise _held(self.save_dir, self._holder()) from None
        sock.listen(16)
        self._socket = sock

    def _holder(self) -> str:
        """The holder's PID, from the credentials the kernel keeps for a connection to its socket."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.settimeout(1.0)
                probe.connect(self.address)
                pid, _, _ = struct.unpack("3i", probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
                return str(pid)
            except OSError:
                return "unknown"

    def release(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = self._lock(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def acquire_if_present(self) -> None:
        """Take the lock without creating or writing anything (when there is a lock file at all)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        self._fd = self._lock(fd)

    def _lock(self, fd: int) -> int:
        """flock `fd`, or close it and raise LockHeld naming the PID written by the holder."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise _held(self.save_dir, holder) from None
        return fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class SaveFolderLock:
    """Both locks, taken path lock first: LockHeld when a live pai-launch holds either."""

    def __init__(self, save_dir: Path, node: int = 0) -> None:
        self.save_dir = save_dir
        self._path_lock = PathLock(save_dir, node)
        self._folder_lock = FolderLock(save_dir, node)

    @property
    def path(self) -> Path:
        return self._folder_lock.path

    def acquire(self, *, write: bool = True) -> None:
        """`write=False`: only check and hold (the lock file is neither created nor written), as --fresh does
        before moving the folder aside."""
        self._path_lock.acquire()
        try:
            if write:
                self._folder_lock.acquire()
            else:
                self._folder_lock.acquire_if_present()
        except BaseException:
            self._path_lock.release()
            raise

    def write(self) -> None:
        """The lock file made and written, the path lock already held: the save folder is taken (again)."""
        self._folder_lock.acquire()

    def release(self) -> None:
        self._folder_lock.release()
        self._path_lock.release()
