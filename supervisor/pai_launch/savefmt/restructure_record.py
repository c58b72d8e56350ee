"""Reading rank 0's record of a restructure inside the running workers (SAVE/.pai-launch/restructures/*.json).

The training process writes it (pai_launch.in_process.Record); the supervisor logs what it says. The file comes from
the user's process, so it is read bounded, without following a link, and only fields of the expected kinds are kept.
"""

from __future__ import annotations

import json
from pathlib import Path

from pai_launch.savefmt import safeopen

#: Field -> the types it may have; anything else in the file is left out.
FIELDS: dict[str, tuple[type, ...]] = {
    "switch": (str,), "resumed_s": (int, float), "rewrap_s": (int, float), "ranks": (int,), "parameters": (int,),
    "memory_before": (int,), "memory_after": (int,), "at": (int, float),
}
MAX_BYTES = 16 * 1024


def parse(data: bytes) -> dict | None:
    """The record's known fields of the right kinds; None when it is not a JSON object (pure)."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {key: value[key] for key, kinds in FIELDS.items()
            if isinstance(value.get(key), kinds) and not isinstance(value.get(key), bool)}


def read(path: Path) -> dict | None:
    """The record at `path`, or None when it cannot be read (gone, a link, too large, not a record)."""
    try:
        return parse(safeopen.read_bytes(path, MAX_BYTES))
    except OSError:
        return None
