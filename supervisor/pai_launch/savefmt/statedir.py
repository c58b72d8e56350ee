"""SAVE/.pai-launch, pai-launch's own folder in the save folder: made by the running user, and used only when it is
theirs.

Another local user who could plant a symbolic link there, or make the folder before us, could have pai-launch (often
root, under systemd) truncate, append to or move files it never meant to touch. So the folder is opened without
following a link (O_NOFOLLOW|O_DIRECTORY) and judged by fstat on that very descriptor: a symbolic link, something that
is not a folder, or a folder of another user is refused with one line (a StateError: exit 2). A folder of ours that
others may write into (made by an older pai-launch under a permissive umask) loses that write access; a new one is made
0755, so `pai-launch status` of other users still reads the run. Files in it are then opened relative to the
descriptor (`dir_fd`), so a folder swapped for a link after the check is never followed either.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pai_launch.savefmt.record import STATE_DIR, StateError

#: Group and other write access: whoever has it could plant links in the folder.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class UnsafeStateDir(StateError):
    """SAVE/.pai-launch, or a lock file in it, is not ours to use; the message names it and the fix."""


def user_name(uid: int) -> str:
    """`name (uid N)`, or `uid N` when the system knows no name for it."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def problem(path: Path, st: os.stat_result, euid: int, *, want_dir: bool) -> str | None:
    """Why `path` (lstat'ed or fstat'ed as `st`) must not be used by the user `euid`, or None (pure)."""
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link: pai-launch never follows links there; remove it and start again"
    if want_dir and not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder: move it aside and start again"
    if not want_dir and not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file: move it aside and start again"
    if st.st_uid != euid:
        return (f"{path} belongs to {user_name(st.st_uid)}, not to {user_name(euid)} who runs pai-launch: run "
                "pai-launch as its owner, or remove it when no run of theirs uses the folder")
    return None


def _refuse_link(path: Path) -> UnsafeStateDir:
    """The error for an open that met a symbolic link (ELOOP), or a folder that is not one (ENOTDIR)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return UnsafeStateDir(f"{path} cannot be opened as a folder ({exc.strerror}): check the save folder "
                              f"{path.parent}")
    return UnsafeStateDir(problem(path, st, os.geteuid(), want_dir=True)
                          or f"{path} changed while pai-launch opened it: check who else writes into the save folder")


def open_state_dir(save_dir: Path, *, create: bool) -> int | None:
    """An O_DIRECTORY descriptor of SAVE/.pai-launch, checked (UnsafeStateDir); made first (with SAVE) when `create`,
    else None when it is not there. OSError: the save folder cannot be written."""
    path = save_dir / STATE_DIR
    if create:
        save_dir.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path, 0o755)  # never group- or other-writable, whatever the umask
        except FileExistsError:
            pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse_link(path) from None
        raise
    try:
        st = os.fstat(fd)
        why = problem(path, st, os.geteuid(), want_dir=True)
        if why:
            raise UnsafeStateDir(why)
        if st.st_mode & _OTHERS_WRITE:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_OTHERS_WRITE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check(save_dir: Path) -> None:
    """UnsafeStateDir when SAVE/.pai-launch is there and not ours to use (nothing is made or changed)."""
    path = save_dir / STATE_DIR
    try:
        st = os.lstat(path)
    except OSError:
        return
    why = problem(path, st, os.geteuid(), want_dir=True)
    if why:
        raise UnsafeStateDir(why)


def subfolder(save_dir: Path, name: str) -> Path:
    """SAVE/.pai-launch/NAME (quarantine), made when absent and checked like the folder itself: a link planted there
    while the folder was open to others is refused (UnsafeStateDir), never followed."""
    folder = open_state_dir(save_dir, create=True)
    try:
        try:
            os.mkdir(name, 0o755, dir_fd=folder)
        except FileExistsError:
            pass
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    finally:
        os.close(folder)
    path = save_dir / STATE_DIR / name
    why = problem(path, st, os.geteuid(), want_dir=True)
    if why:
        raise UnsafeStateDir(why)
    return path
