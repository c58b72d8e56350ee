"""Whether the disk the workers' output goes to (--log-dir, else the run's temporary log folder) has room.

On a full disk every rank's stdout and stderr files stay empty: a failure would show no log tail and no word of why.
So the disk is checked before each generation, and again when a generation fails; when it is full,
the run ends (exit 6) with a reason naming the folder, its free space and the fix.
"""

from __future__ import annotations

from pathlib import Path

from pai_launch.savefmt import savedir
from pai_launch.savefmt.savedir import MIN_FREE_BYTES


def full_message(folder: Path, available: int, *, given: bool, needed: int = MIN_FREE_BYTES) -> str | None:
    """The one line naming a full disk under `folder` (`given`: it is --log-dir's), or None when there is room."""
    if available >= needed:
        return None
    if given:
        return (f"the disk holding --log-dir {folder} is full: {available // 1024} KiB free, at least {needed // 1024} "
                "KiB "
                "needed for the workers' output: free space there or give --log-dir a folder on another disk")
    return (f"the disk holding the temporary log folder {folder} is full: {available // 1024} KiB free, at least "
            f"{needed // 1024} KiB needed for the workers' output: free space there, or set TMPDIR or --log-dir to a "
            "folder on another disk")


def problem(folder: Path | str, *, given: bool) -> str | None:
    """Why the workers' output cannot be kept under `folder`, or None."""
    folder = Path(folder)
    available = savedir.free_bytes(folder)
    return None if available is None else full_message(folder, available, given=given)
