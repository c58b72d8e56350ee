"""One pai-launch per save folder: two locks, both released by the kernel however their holder dies, taken path lock
first.

- The path lock (pathlock.py), an abstract unix socket named after the folder's absolute path: seen on this machine
  only, and not in the folder, so a folder removed and re-created cannot be taken while its first holder still stops
  its workers.
- The lock file (folderlock.py), an flock on SAVE/.pai-launch/lock.node<R> holding the holder's PID: seen by every
  machine that shares the folder.
"""

from __future__ import annotations

from pathlib import Path

from pai_launch.savefmt.folderlock import FolderLock
from pai_launch.savefmt.pathlock import PathLock


class SaveFolderLock:
    """Both locks, taken path lock first: LockHeld when a live pai-launch holds either."""

    def __init__(self, save_dir: Path, node: int = 0) -> None:
        self.save_dir = save_dir
        self._path_lock = PathLock(save_dir, node)
        self._folder_lock = FolderLock(save_dir, node)

    @property
    def path(self) -> Path:
        return self._folder_lock.path

    @property
    def squatted(self) -> dict | None:
        """Another user's socket on the path lock's name, for the log (None: the path lock is ours)."""
        return self._path_lock.describe_squatter() if self._path_lock.squatted else None

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
