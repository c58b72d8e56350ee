"""One pai-launch per save folder: two locks, both released by the kernel however their holder dies.

- An flock on SAVE/.pai-launch/lock.node<R> (R: the node rank), holding the holder's PID: seen by every machine that
  shares the folder (NFS, a volume mounted into several containers). The file is the running user's, mode 0600, opened
  relative to the checked folder (statedir) and never through a symbolic link, so no other user can lock it, and a
  planted link or another user's file is refused (exit 2) before anything is written.
- An abstract unix socket named after the folder's absolute path: seen on this machine only, but it
  does not live in the folder, so a save folder that was removed and re-created cannot be taken by a
  second pai-launch while the first is still stopping its workers. Its holder's PID and user come from the
  kernel (SO_PEERCRED), so nothing has to be written anywhere. The name is predictable and abstract sockets have no
  permissions, so any local user can bind it first: a holder is believed only when it is the same user or root (who
  could stop us anyway); anyone else's socket is a squatter, reported and ignored, and the flock alone decides.

A refusal names a PID only when the kernel shows that process holding the lock: the socket's peer, or the flock's
holder in /proc/locks.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pai_launch.savefmt import statedir
from pai_launch.savefmt.record import STATE_DIR, StateError

_CREDENTIALS = struct.Struct("3i")
#: Connection attempts refused before a bound name counts as not listening (a pai-launch binds, then listens).
_REFUSED_TRIES = 5
#: How long a full listen backlog is waited out: the holder takes and closes each probe at once.
_BUSY_WAIT_S = 1.0


def lock_file(node: int) -> str:
    return f"lock.node{node}"


class LockHeld(StateError):
    """Another live pai-launch holds the save folder; the message names its PID."""


def _held(save_dir: Path, holder: str) -> LockHeld:
    return LockHeld(f"another pai-launch (PID {holder}) is running on {save_dir}: wait for it or stop it")


@dataclass(frozen=True)
class Peer:
    """Who listens on an abstract socket, as the kernel tells (pid 0: a process in another PID namespace)."""

    pid: int
    uid: int


def trusted(peer: Peer | None, euid: int) -> bool:
    """Whether a path lock's holder is believed (pure): the same user, or root. A socket of any other user, or one
    nobody listens on, only squats the name."""
    return peer is not None and peer.uid in (euid, 0)


def peer_of(address: str, *, tries: int = _REFUSED_TRIES) -> Peer | None:
    """The process listening on `address`, from SO_PEERCRED of a connection to it; None when nothing listens there
    (the name bound by a socket that never listens, or nothing at all). A full listen backlog (EAGAIN: the holder's
    thread has not yet taken earlier probes) is waited out for up to a second; it says someone listens."""
    busy_until = time.monotonic() + _BUSY_WAIT_S
    attempt = 0
    while True:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(address)
                pid, uid, _ = _CREDENTIALS.unpack(probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
                return Peer(pid, uid)
            except ConnectionRefusedError:
                attempt += 1
                if attempt >= tries:
                    return None
                time.sleep(0.02)  # bound, not yet listening: a starting pai-launch listens within moments
            except BlockingIOError:
                if time.monotonic() >= busy_until:
                    return None
                time.sleep(0.005)
            except (OSError, AttributeError):
                return None


class PathLock:
    """A listening abstract socket whose name is derived from the save folder's absolute path."""

    def __init__(self, save_dir: Path, node: int = 0) -> None:
        self.save_dir = save_dir
        digest = hashlib.sha256(os.fsencode(os.path.realpath(save_dir))).hexdigest()[:40]
        suffix = "" if node == 0 else f"/node{node}"  # several nodes of one job may share a machine
        self.address = f"\0pai-launch/save-folder/{digest}{suffix}"
        self._socket: socket.socket | None = None
        #: Another user's socket on our name (None: ours, or not tried); the run goes on, held by the flock alone.
        self.squatter: Peer | None = None
        self.squatted = False

    def acquire(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(self.address)
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE:
                raise
            peer = peer_of(self.address)
            if trusted(peer, os.geteuid()) and peer.pid:
                raise _held(self.save_dir, str(peer.pid)) from None
            if trusted(peer, os.geteuid()):
                raise LockHeld(f"another pai-launch in another PID namespace or container is running on {self.save_dir}: "
                               "wait for it or stop it") from None
            self.squatter, self.squatted = peer, True
            return
        sock.listen(socket.SOMAXCONN)
        self._socket = sock
        # Every probe of the lock (pai-launch status, a second pai-launch) connects to learn who holds it: each
        # connection is taken and closed at once, or once the backlog is full no probe sees the holder.
        threading.Thread(target=_answer_probes, args=(sock,), name="path-lock", daemon=True).start()

    def describe_squatter(self) -> dict:
        """The squatter, for the log: its PID and user when it listens, else only that something bound the name."""
        if self.squatter is None:
            return {"socket": self.address[1:], "holder": "a socket that does not listen"}
        return {"socket": self.address[1:], "holder_pid": self.squatter.pid, "holder_uid": self.squatter.uid,
                "holder_user": statedir.user_name(self.squatter.uid)}

    def release(self) -> None:
        if self._socket is not None:
            try:
                self._socket.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            except OSError:
                pass
            self._socket.close()
            self._socket = None


def _answer_probes(sock: socket.socket) -> None:
    """Take each connection to the lock and close it: the peer has read our credentials (SO_PEERCRED) by then."""
    while True:
        try:
            connection, _ = sock.accept()
        except OSError:  # the lock was released
            return
        connection.close()


def flock_holders(proc_locks: str, device: int, inode: int) -> list[int]:
    """PIDs holding an flock on (device, inode), from /proc/locks' text ("1: FLOCK ADVISORY WRITE 15005 fe:00:2146539 0 EOF")."""
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
    """Why the flock was refused (pure). `written`: the PID the file holds; `holders`: the PIDs /proc/locks shows holding
    it (None: /proc/locks could not be read). A PID is named as the holder only when the kernel shows it holding."""
    visible = [pid for pid in holders or [] if pid > 0]
    if written.isdigit() and int(written) in visible:
        return str(_held(save_dir, written))
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
