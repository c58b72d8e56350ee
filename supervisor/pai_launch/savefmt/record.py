"""The run's record in SAVE/.pai-launch/state.json, so a restarted pai-launch continues where it stopped.

state.json holds the run's fingerprint (script, its arguments, nproc, pai-launch version), run id,
generation count, failure budget used, last switch file and last exit cause. It is written
atomically (temp file, fsync, rename), so a crash leaves the old or the new version, never half of
one. Anyone who can write the folder can put anything there, so it is read through safeopen (a regular file of at
most 16 MiB) and checked field by field before anything in it is used; one that fails is moved aside, never
deleted. (events.jsonl beside it is logs.EventsFile; the lock is locks.SaveFolderLock.)
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from pai_launch import __version__
from pai_launch.savefmt import safeopen
from pai_launch.savefmt.atomic import write_atomically
from pai_launch.wire.errors import LaunchError

STATE_DIR = ".pai-launch"
#: SAVE/.pai-launch/restructures: one JSON record per restructure inside the running workers (--restructure in-process).
RECORDS_FOLDER = "restructures"
STATE_FILE = "state.json"
EVENTS_FILE = "events.jsonl"
FORMAT = 1


class StateError(LaunchError):
    """The state folder cannot be used (held by another pai-launch, unreadable, or another run's)."""


_SWITCH = re.compile(r"^switch_\d+\.pt$")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def plain_save_name(name: object) -> bool:
    """A save folder's name as a record may hold it: a relative path inside the working directory (pure)."""
    if not isinstance(name, str) or not name or "\0" in name or "\\" in name:
        return False
    parts = PurePosixPath(name).parts
    return not PurePosixPath(name).is_absolute() and all(part not in ("..", ".") for part in parts) and bool(parts)


def record_problem(data: object) -> str | None:
    """What is wrong with a parsed state.json, field by field, or None when every field has its type (pure)."""
    if not isinstance(data, dict):
        return f"it holds a JSON {type(data).__name__}, not an object"
    for key in ("fingerprint", "run_id", "save_name"):
        if key not in data:
            return f"it has no {key!r}"
    checks = {
        "fingerprint": (lambda v: isinstance(v, dict), "an object"),
        "run_id": (lambda v: isinstance(v, str), "a string"),
        "save_name": (plain_save_name, "a folder name inside the working directory"),
        "generation": (lambda v: _is_int(v) and v >= 0, "a whole number, 0 or more"),
        "failures": (lambda v: _is_int(v) and v >= 0, "a whole number, 0 or more"),
        "init_done": (lambda v: isinstance(v, bool), "true or false"),
        "last_switch": (lambda v: v is None or (isinstance(v, str) and bool(_SWITCH.match(v))), "null or switch_N.pt"),
        "last_exit": (lambda v: v is None or (isinstance(v, dict) and (v.get("code") is None or _is_int(v.get("code")))
                                              and isinstance(v.get("reason", ""), str)), "null or {code, reason}"),
        "updated": (lambda v: isinstance(v, str), "a string"),
        "format": (_is_int, "a whole number"),
        "history": (lambda v: isinstance(v, list) and all(isinstance(item, dict) for item in v), "a list of objects"),
    }
    for key, (valid, wanted) in checks.items():
        if key in data and not valid(data[key]):
            return f"its {key!r} is {json.dumps(data[key])[:80]}, not {wanted}"
    return None


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
    #: Earlier invocations of pai-launch on this folder, oldest first (at most HISTORY_KEPT): how each ended and the
    #: failures it counted. Each invocation has a failure budget of its own; this is what `pai-launch status` shows.
    history: list = field(default_factory=list)


#: Earlier invocations a record keeps.
HISTORY_KEPT = 50


def carried_history(previous: RunRecord | None) -> list:
    """The history a new invocation records: the previous record's, and the previous invocation itself."""
    if previous is None:
        return []
    ended = {"updated": previous.updated, "generation": previous.generation, "failures": previous.failures,
             "last_exit": previous.last_exit}
    return [*previous.history, ended][-HISTORY_KEPT:]


def fingerprint(script: Path, script_args: tuple[str, ...], nproc: int) -> dict:
    """What makes a restart 'the same run': the command and the launcher that ran it."""
    return {"script": str(script.resolve()), "script_args": list(script_args), "nproc": nproc,
            "pai_launch": __version__}


def fingerprint_differences(old: dict, new: dict) -> list[str]:
    return [f"{key} {old.get(key)!r} -> {new.get(key)!r}" for key in sorted(set(old) | set(new)) if old.get(key)
            != new.get(key)]


class RecordStore:
    def __init__(self, save_dir: Path) -> None:
        self.folder = save_dir / STATE_DIR

    @property
    def state_path(self) -> Path:
        return self.folder / STATE_FILE

    @property
    def events_path(self) -> Path:
        return self.folder / EVENTS_FILE

    def load(self, *, move_bad: bool = True) -> RunRecord | None:
        """The previous run's record; None without one. StateError for one that cannot be trusted (not a regular file,
        too large, not JSON, a field of the wrong type): moved aside (never deleted) when `move_bad`."""
        try:
            data = json.loads(safeopen.read_bytes(self.state_path, safeopen.MAX_RECORD))
        except FileNotFoundError:
            return None
        except (safeopen.WrongKind, safeopen.TooLarge) as exc:
            self._refuse(exc.strerror, move_bad)
        except OSError as exc:
            raise StateError(f"{self.state_path} cannot be read ({exc.strerror or exc}): check its "
                             "permissions") from exc
        except ValueError:
            self._refuse("is not valid JSON", move_bad)
        problem = record_problem(data)
        if problem is not None:
            self._refuse(f"is not a pai-launch state file: {problem}", move_bad)
        return RunRecord(**{key: data[key] for key in RunRecord.__dataclass_fields__ if key in data})

    def _refuse(self, why: str, move: bool) -> None:
        """StateError for a state.json that cannot be trusted, after moving it aside when `move`."""
        if not move:
            raise StateError(f"{self.state_path} {why}: move it aside to start a new record")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = self.folder / f"{STATE_FILE}.bad-{stamp}"
        counter = 1
        while os.path.lexists(target):
            counter += 1
            target = self.folder / f"{STATE_FILE}.bad-{stamp}.{counter}"
        try:
            os.rename(self.state_path, target)
        except OSError as exc:
            raise StateError(f"{self.state_path} {why}, and it cannot be moved aside ({exc.strerror or exc}): "
                             "move it aside to start a new record") from None
        raise StateError(f"{self.state_path} {why}: moved aside to {target.name}; start again to begin a new record "
                         "(switch files in the folder are resumed from)")

    def save(self, state: RunRecord) -> None:
        """Atomically replace state.json (temp file, fsync, rename, fsync the folder)."""
        # Not parents=True: the save folder exists from the start (its lock makes it); once the user removed
        # it mid-run, re-creating it just to hold our state would resurrect a folder they deleted.
        self.folder.mkdir(exist_ok=True)
        safeopen.real_folder(self.folder)  # a link in its place would take our writes elsewhere
        state.updated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_atomically(self.state_path, (json.dumps(asdict(state), indent=2) + "\n").encode(), durable=True)
