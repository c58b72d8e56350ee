"""The run's record in SAVE/.pai-launch/state.json, so a restarted pai-launch continues where it stopped.

state.json holds the run's fingerprint (script, its arguments, nproc, pai-launch version), run id,
generation count, failure budget used, last switch file and last exit cause. It is written
atomically (temp file, fsync, rename), so a crash leaves the old or the new version, never half of
one. (events.jsonl beside it is logs.EventsFile; the lock is locks.SaveFolderLock.)
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pai_launch import __version__
from pai_launch.atomic import write_atomically

STATE_DIR = ".pai-launch"
STATE_FILE = "state.json"
EVENTS_FILE = "events.jsonl"
FORMAT = 1


class StateError(Exception):
    """The state folder cannot be used (held by another pai-launch, unreadable, or another run's)."""


@dataclass
class RunRecord:
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


class RecordStore:
    def __init__(self, save_dir: Path) -> None:
        self.folder = save_dir / STATE_DIR

    @property
    def state_path(self) -> Path:
        return self.folder / STATE_FILE

    @property
    def events_path(self) -> Path:
        return self.folder / EVENTS_FILE

    def load(self) -> RunRecord | None:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StateError(f"{self.state_path} is unreadable ({exc}): move it aside to start over") from exc
        known = {key: data[key] for key in RunRecord.__dataclass_fields__ if key in data}
        try:
            return RunRecord(**known)
        except TypeError as exc:
            raise StateError(f"{self.state_path} is not a pai-launch state file: move it aside") from exc

    def save(self, state: RunRecord) -> None:
        """Atomically replace state.json (temp file, fsync, rename, fsync the folder)."""
        # Not parents=True: the save folder exists from the start (its lock makes it); once the user removed
        # it mid-run, re-creating it just to hold our state would resurrect a folder they deleted.
        self.folder.mkdir(exist_ok=True)
        state.updated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_atomically(self.state_path, (json.dumps(asdict(state), indent=2) + "\n").encode(), durable=True)
