"""pai-launch's own state in SAVE/.pai-launch/, so a restarted pai-launch continues where it stopped.

- state.json: the run's fingerprint (script, its arguments, nproc, pai-launch version), run id,
  generation count, failure budget used, last switch file, last exit cause. Written atomically
  (temp file, fsync, rename), so a crash leaves the old or the new version, never half of one.
- events.jsonl: one JSON line per logged event, appended.
- lock.node<N>: one supervisor per save folder and node (an flock, released by the kernel when its
  holder dies, however it dies).

In a multi-node run all nodes share the save folder: node 0 writes state.json and events.jsonl,
every node takes its own lock and reads state.json.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pai_launch import __version__

STATE_DIR = ".pai-launch"
STATE_FILE = "state.json"
EVENTS_FILE = "events.jsonl"
FORMAT = 1


class StateError(Exception):
    """The state folder cannot be used (held by another pai-launch, unreadable, or another run's)."""


@dataclass
class RunState:
    fingerprint: dict
    run_id: str
    save_name: str
    generation: int = 0
    failures: int = 0
    init_done: bool = False
    last_switch: str | None = None
    last_exit: dict | None = None
    updated: str = ""
    format: int = FORMAT


def fingerprint(script: Path, script_args: tuple[str, ...], nproc: int) -> dict:
    """What makes a restart 'the same run': the command and the launcher that ran it."""
    return {"script": str(script.resolve()), "script_args": list(script_args), "nproc": nproc, "pai_launch": __version__}


def fingerprint_differences(old: dict, new: dict) -> list[str]:
    return [f"{key} {old.get(key)!r} -> {new.get(key)!r}" for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


class StateStore:
    def __init__(self, save_dir: Path) -> None:
        self.folder = save_dir / STATE_DIR

    @property
    def state_path(self) -> Path:
        return self.folder / STATE_FILE

    @property
    def events_path(self) -> Path:
        return self.folder / EVENTS_FILE

    def load(self) -> RunState | None:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StateError(f"{self.state_path} is unreadable ({exc}): move it aside to start over") from exc
        known = {key: data[key] for key in RunState.__dataclass_fields__ if key in data}
        try:
            return RunState(**known)
        except TypeError as exc:
            raise StateError(f"{self.state_path} is not a pai-launch state file: move it aside") from exc

    def save(self, state: RunState) -> None:
        """Atomically replace state.json: write a temp file, fsync it, rename it over, fsync the folder."""
        # Not parents=True: the save folder exists from the start (NodeLock makes it); once the user removed
        # it mid-run, re-creating it just to hold our state would resurrect a folder they deleted.
        self.folder.mkdir(exist_ok=True)
        state.updated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fd, temp = tempfile.mkstemp(prefix=".state-", suffix=".tmp", dir=self.folder)
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the state from other users of a shared save folder
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(asdict(state), handle, indent=2)
                handle.write("\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.state_path)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        dir_fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class NodeLock:
    """An exclusive flock on SAVE/.pai-launch/lock.node<N>, holding the holder's PID for error messages."""

    def __init__(self, save_dir: Path, node_rank: int = 0) -> None:
        self.path = save_dir / STATE_DIR / f"lock.node{node_rank}"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = self._lock(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def _lock(self, fd: int) -> int:
        """flock `fd` or close it and raise StateError naming the PID written by the holder."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StateError(
                f"another pai-launch (PID {holder}) is running on {self.path.parent.parent}: wait for it or stop it"
            ) from None
        return fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def hold_without_writing(self) -> None:
        """Take the lock if there is a lock file and nobody holds it, writing nothing (--fresh then moves the folder
        aside); StateError naming the holder when a live pai-launch runs on the folder. release() lets it go."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        self._fd = self._lock(fd)
