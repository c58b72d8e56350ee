"""The record of the save folders pai-launch adopted: `.pai-launch-adopted.json` in the working directory.

Without --save-name a script that saves elsewhere has its folder adopted once its init run shows where (see
session.adopt). The record names that folder for the command (script, its arguments, the default save name), so the
same command started again resumes there, sees it complete, and `pai-launch status` finds it, instead of looking in the
default folder and running the init run again (which a script that clears its folder on a fresh start would answer by
removing its switch files). It lives beside the default save folder, which the script never writes and which is
therefore never made. Written atomically; a record that cannot be read is refused, never guessed at or deleted.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pai_launch.savefmt import safeopen
from pai_launch.savefmt.atomic import write_atomically
from pai_launch.savefmt.record import StateError, plain_save_name

RECORD_NAME = ".pai-launch-adopted.json"
FORMAT = 1


class AdoptionRecordError(StateError):
    """The record of adopted folders cannot be read: which folder this command uses cannot be told."""


@dataclass(frozen=True)
class Adoption:
    script: str  # resolved path
    script_args: tuple[str, ...]
    instead_of: str  # the save name the command had (the default)
    save_name: str  # the folder the script writes, relative to the working directory
    run_id: str = ""
    updated: str = ""

    @classmethod
    def command(cls, script: Path, script_args: tuple[str, ...], instead_of: str, save_name: str,
                run_id: str = "") -> Adoption:
        """The adoption of `save_name` by the command that runs `script` (resolved here) with `script_args` and
        would have saved in `instead_of`."""
        return cls(str(script.resolve()), tuple(script_args), instead_of, save_name, run_id)

    def same_command(self, other: Adoption) -> bool:
        return (self.script, self.script_args, self.instead_of) == (other.script, other.script_args, other.instead_of)


def adopted_folder(workdir: Path, wanted: Adoption, fresh: bool) -> Adoption | None:
    """The adoption recorded for `wanted`'s command in `workdir` (None: none). StateError: the record is unreadable,
    or names a folder that is gone and `fresh` is not given (restoring it resumes; --fresh starts over there), since
    starting over unasked would train again from nothing."""
    found = find(workdir, wanted)
    if found is None:
        return None
    if not (workdir / found.save_name).is_dir() and not fresh:
        raise StateError(f"pai-launch adopted the folder {found.save_name} for this command (recorded in "
                         f"{record_path(workdir)}), but it is not there: restore it to resume, or add --fresh to "
                         "start over")
    return found


def record_path(workdir: Path) -> Path:
    return workdir / RECORD_NAME


def load(workdir: Path) -> list[Adoption]:
    """Every adoption recorded in `workdir`, oldest first; [] without a record. AdoptionRecordError: unreadable."""
    path = record_path(workdir)
    try:
        data = json.loads(safeopen.read_bytes(path, safeopen.MAX_RECORD))
        entries = data["adopted"]
        if not isinstance(data, dict) or not isinstance(data.get("adopted"), list):
            raise TypeError("no list of adopted folders")
        for e in entries:
            if not plain_save_name(e["save_name"]):
                raise ValueError(f"save_name {e['save_name']!r} is not a folder inside the working directory")
        return [Adoption(str(e["script"]), tuple(str(a) for a in e["script_args"]), str(e["instead_of"]),
                         str(e["save_name"]), str(e.get("run_id", "")), str(e.get("updated", ""))) for e in entries]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AdoptionRecordError(
            f"{path} cannot be read ({type(exc).__name__}: {exc}): it names the save folders pai-launch adopted; "
            "repair it, or move it aside and pass --save-name with the folder your script writes") from exc


def find(workdir: Path, wanted: Adoption) -> Adoption | None:
    """The folder adopted for `wanted`'s command, if one was."""
    return next((a for a in reversed(load(workdir)) if a.same_command(wanted)), None)


def newest(workdir: Path) -> Adoption | None:
    """The adoption recorded last (what `pai-launch status` shows without an argument)."""
    found = load(workdir)
    return found[-1] if found else None  # remember() appends


def remember(workdir: Path, adoption: Adoption) -> None:
    """Record `adoption`, replacing an older one of the same command; atomically (temp file, fsync, rename)."""
    kept = [a for a in load(workdir) if not a.same_command(adoption)]
    stamped = Adoption(**{**asdict(adoption), "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    entries = [{**asdict(a), "script_args": list(a.script_args)} for a in [*kept, stamped]]
    text = json.dumps({"format": FORMAT, "adopted": entries}, indent=2) + "\n"
    write_atomically(record_path(workdir), text.encode(), durable=True)
