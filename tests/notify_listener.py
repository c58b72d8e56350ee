"""A stand-in for systemd's side of the notify protocol: an AF_UNIX datagram listener whose address goes into
NOTIFY_SOCKET, recording each message with its sender's PID (SO_PASSCRED)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    pid: int
    at: float
    fields: tuple[str, ...]

    def has(self, assignment: str) -> bool:
        return assignment in self.fields

    def status(self) -> str | None:
        return next((f[len("STATUS="):] for f in self.fields if f.startswith("STATUS=")), None)


class NotifyListener:
    """What systemd does for a Type=notify unit: a datagram socket whose address goes into NOTIFY_SOCKET."""

    def __init__(self, address: str) -> None:
        self.address = address  # a path, or "@name" for an abstract socket
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        self.sock.settimeout(0.1)
        self.messages: list[Message] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        creds_size = struct.calcsize("3i")
        while not self._stop.is_set():
            try:
                data, ancillary, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(creds_size))
            except socket.timeout:
                continue
            pid = next((struct.unpack("3i", cdata[:creds_size])[0] for level, kind, cdata in ancillary
                        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS), -1)
            self.messages.append(Message(pid, time.monotonic(), tuple(data.decode().split("\n"))))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()

    def statuses(self) -> list[str]:
        return [s for s in (m.status() for m in self.messages) if s is not None]
