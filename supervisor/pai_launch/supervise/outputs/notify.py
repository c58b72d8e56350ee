"""The systemd notify protocol: tell the service manager we are ready, what we are doing, that our loop is alive,
and that we are stopping.

Active only when NOTIFY_SOCKET is set (systemd sets it for Type=notify units): a socket path, or an
abstract socket written `@name`. WATCHDOG=1 goes out every half WATCHDOG_USEC, and only when
WATCHDOG_PID (if systemd set it) is us. Every send error is ignored: a service manager that went
away must never fail a training run. Children get none of these variables: only pai-launch speaks
for the service (NotifyAccess=main).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

#: What systemd gives the main process; stripped from every child's environment.
NOTIFY_VARS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the notify variables, for the processes we start."""
    return {key: value for key, value in env.items() if key not in NOTIFY_VARS}


class Notifier:
    def __init__(self, env: Mapping[str, str], pid: int) -> None:
        address = env.get("NOTIFY_SOCKET", "")
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._socket: socket.socket | None = None
        if self._address:
            try:
                self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            except OSError:
                self._socket = None
        self.watchdog_interval = _watchdog_interval(env, pid) if self._socket is not None else None
        self._next_watchdog = 0.0
        self._status = self._phase_status = ""
        self._ready = self._stopping = False

    @property
    def active(self) -> bool:
        return self._socket is not None

    def send(self, *assignments: str) -> None:
        if self._socket is None:
            return
        try:
            self._socket.sendto("\n".join(assignments).encode(), self._address)
        except OSError:
            pass  # no listener, a full queue, a vanished socket: never the run's problem

    def report(self, status: str, *, stopping: bool) -> None:
        """The run's phase, told when it changed (a finer status() in between, e.g. dendrites added, stays until
        then); `stopping` once the run is stopping or done."""
        if status == self._phase_status:
            return
        self._phase_status = status
        if stopping:
            self.stopping(status)
        else:
            self.status(status)

    def ready(self) -> None:
        """READY=1, once: preflight passed and the first process of the run is started."""
        if not self._ready:
            self._ready = True
            self.send("READY=1", f"STATUS={self._status}")

    def status(self, text: str) -> None:
        """STATUS=text when it changed; before READY=1 it is only kept, to go out with READY=1."""
        if text != self._status:
            self._status = text
            if self._ready and not self._stopping:
                self.send(f"STATUS={text}")

    def stopping(self, text: str) -> None:
        """STOPPING=1, once, with why."""
        if not self._stopping:
            self._stopping = True
            self._status = text
            self.send("STOPPING=1", f"STATUS={text}")

    def watchdog(self, now: float) -> None:
        """WATCHDOG=1 when it is due, from READY=1 on (called from the loop, so it stops if the loop does)."""
        if self.watchdog_interval is not None and (self._ready or self._stopping) and now >= self._next_watchdog:
            self._next_watchdog = now + self.watchdog_interval
            self.send("WATCHDOG=1")

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _watchdog_interval(env: Mapping[str, str], pid: int) -> float | None:
    """Half of WATCHDOG_USEC in seconds (systemd's advice), or None when off or meant for another process."""
    usec = env.get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    owner = env.get("WATCHDOG_PID", "")
    if owner and owner != str(pid):
        return None
    return int(usec) / 2 / 1_000_000
