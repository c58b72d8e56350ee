"""The save folder's path lock: a listening abstract unix socket named after the folder's absolute path, released by
the kernel however its holder dies.

Seen on this machine only, but it does not live in the folder, so a save folder that was removed and re-created
cannot be taken by a second pai-launch while the first is still stopping its workers. Its holder's PID and user come
from the kernel (SO_PEERCRED), so nothing has to be written anywhere. The name is predictable and abstract sockets
have no permissions, so any local user can bind it first: a holder is believed only when it is the same user or root
(who could stop us anyway); anyone else's socket is a squatter, reported and ignored, and the flock (folderlock.py)
alone decides.
"""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pai_launch.savefmt import statedir
from pai_launch.savefmt.folderlock import LockHeld

_CREDENTIALS = struct.Struct("3i")
#: Connection attempts refused before a bound name counts as not listening (a pai-launch binds, then listens).
_REFUSED_TRIES = 5
#: How long a full listen backlog is waited out: the holder takes and closes each probe at once.
_BUSY_WAIT_S = 1.0


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
                pid, uid, _ = _CREDENTIALS.unpack(probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                   _CREDENTIALS.size))
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
                raise LockHeld.by(self.save_dir, str(peer.pid)) from None
            if trusted(peer, os.geteuid()):
                raise LockHeld("another pai-launch in another PID namespace or container is running on "
                               f"{self.save_dir}: "
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

