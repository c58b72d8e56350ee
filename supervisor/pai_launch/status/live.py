"""Is a pai-launch running on the save folder now? Read, never taken: the folder's locks are looked at, not locked.

For each SAVE/.pai-launch/lock.node<R> (holding its holder's PID), on this machine:
- the path lock's abstract socket: connecting to it gives the holder's PID and user from the kernel (SO_PEERCRED);
  the holder never accepts, so the probe changes nothing for it; a socket of a user other than the lock file's owner
  (or root) is a squatter on the predictable name, not a holder;
- /proc/locks: the process holding an flock on the lock file's inode;
- psutil: the PID is alive, not a zombie, a pai-launch, and not a newer process that reused the PID.
A supervisor on another machine sharing the folder cannot be seen from here; the summary says so.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from pai_launch.savefmt.folderlock import flock_holders
from pai_launch.savefmt.pathlock import PathLock, peer_of, trusted
from pai_launch.savefmt.record import STATE_DIR
from pai_launch.status.model import Supervisor

_LOCK_NAME = re.compile(r"^lock\.node(\d+)$")
#: Seconds a process may have started after its lock file was written and still be the one that wrote it.
_CLOCK_SLACK = 2.0


def lock_nodes(names: list[str]) -> list[tuple[int, str]]:
    """(node, file name) for every lock.node<R> among `names`, node 0 first."""
    found = [(int(m.group(1)), name) for name in names if (m := _LOCK_NAME.match(name))]
    return sorted(found)


def looks_like_pai_launch(cmdline: list[str]) -> bool:
    return any("pai_launch" in arg or os.path.basename(arg) == "pai-launch" for arg in cmdline)


def judge(node: int, lock_name: str, lock_pid: int | None, lock_mtime: float | None, holder: int | None,
          facts: dict | None, host: str, probed: bool) -> Supervisor:
    """Decide from what was seen. `holder`: the PID the kernel says holds a lock (None: none seen); `facts`: psutil's
    view of the PID in question (alive, cmdline, create_time), None when it does not exist; `probed`: the kernel
    probes were available (Linux), so no holder means no holder on this machine."""
    pid = holder if holder is not None else lock_pid
    alive = bool(facts and facts.get("alive"))
    since = facts.get("create_time") if facts else None
    if holder is not None and alive:
        return Supervisor(node, True, pid, host, since, f"PID {pid} holds {lock_name} on this machine ({host})")
    if lock_pid is None:
        return Supervisor(node, False, None, None, None, f"{lock_name} names no PID and no process holds it here")
    reused = since is not None and lock_mtime is not None and since > lock_mtime + _CLOCK_SLACK
    ours = alive and not reused and looks_like_pai_launch(facts.get("cmdline") or [])
    if ours and not probed:
        return Supervisor(node, True, pid, host, since, f"PID {pid} from {lock_name} is a live pai-launch on {host}")
    if ours:
        return Supervisor(node, False, pid, host, since, f"PID {pid} from {lock_name} is alive but no longer holds the "
                          "lock: it is exiting")
    why = "is another program now (its PID was reused)" if alive else "is not running"
    return Supervisor(node, False, pid, None, None, f"PID {pid} from {lock_name} {why} on this machine ({host}); a "
                      "pai-launch on another machine sharing the folder cannot be seen from here")


# --- the thin part that looks ---------------------------------------------------------------------
def socket_holder(save: Path, node: int, owner_uid: int) -> int | None:
    """The PID holding the save folder's path lock on this machine (as the lock file's owner, or root), or None."""
    peer = peer_of(PathLock(save, node).address, tries=1)  # refused: nothing listens (looked at, never waited for)
    return peer.pid or None if trusted(peer, owner_uid) else None


def process_facts(pid: int) -> dict | None:
    import psutil

    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return {"alive": proc.status() != psutil.STATUS_ZOMBIE, "cmdline": proc.cmdline(),
                    "create_time": proc.create_time()}
    except psutil.Error:
        return None


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def supervisors(save: Path, names: list[str]) -> list[Supervisor]:
    """One Supervisor per lock file in SAVE/.pai-launch (`names`: that folder's entries)."""
    host = socket.gethostname()
    try:
        proc_locks = Path("/proc/locks").read_text()
        probed = True
    except OSError:
        proc_locks, probed = "", False
    found = []
    for node, name in lock_nodes(names):
        path = save / STATE_DIR / name
        try:
            st = path.stat()
        except OSError:
            continue
        holders = flock_holders(proc_locks, st.st_dev, st.st_ino)
        holder = socket_holder(save, node, st.st_uid) if probed else None
        holder = holder if holder is not None else (holders[0] if holders else None)
        lock_pid = _read_pid(path)
        pid = holder if holder is not None else lock_pid
        facts = process_facts(pid) if pid is not None else None
        found.append(judge(node, name, lock_pid, st.st_mtime, holder, facts, host, probed))
    return found
