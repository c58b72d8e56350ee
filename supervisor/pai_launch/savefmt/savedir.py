"""What the save folder says: switch checkpoints, the completion marker, the init run's outputs.

PerforatedAI writes these files itself (none atomically); this module only reads them.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from pai_launch.savefmt import safeopen

MARKER = ".training_complete"
INIT_OUTPUT = "array_dims.csv"
_SWITCH_NAME = re.compile(r"^switch_(\d+)\.pt$")

#: file name -> (mtime_ns, size); PerforatedAI can rewrite the same switch_N.pt, so N alone is not progress.
SwitchSnapshot = dict[str, tuple[int, int]]

# Folders never searched for a misplaced save folder: environments, caches, version control.
_SKIP_DIRS = frozenset({"node_modules", "site-packages", "__pycache__", "venv", "env"})
_SEARCH_DEPTH = 4


def switch_number(name: str) -> int | None:
    """N for 'switch_N.pt', else None."""
    match = _SWITCH_NAME.match(name)
    return int(match.group(1)) if match else None


def is_marker(name: str) -> bool:
    return name == MARKER


def snapshot_switches(folder: Path) -> SwitchSnapshot:
    """The switch files in `folder` now, with their mtime and size."""
    snapshot: SwitchSnapshot = {}
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return snapshot
    for entry in entries:
        if switch_number(entry.name) is None:
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        snapshot[entry.name] = (st.st_mtime_ns, st.st_size)
    return snapshot


def changed_switches(before: SwitchSnapshot, after: SwitchSnapshot) -> list[str]:
    """Switch files written or rewritten between two snapshots, lowest N first."""
    changed = [name for name, stamp in after.items() if before.get(name) != stamp]
    return sorted(changed, key=lambda name: switch_number(name) or 0)


def has_switches(folder: Path) -> bool:
    return bool(snapshot_switches(folder))


def newest_switch(folder: Path) -> str | None:
    names = snapshot_switches(folder)
    return max(names, key=lambda name: switch_number(name) or 0) if names else None


def has_init_outputs(folder: Path) -> bool:
    return (folder / INIT_OUTPUT).is_file()


def marker_mtime(folder: Path) -> float | None:
    """When the completion marker was written, or None when there is none."""
    try:
        return (folder / MARKER).stat().st_mtime
    except (FileNotFoundError, NotADirectoryError):
        return None


def find_init_outputs(root: Path, since: float) -> list[Path]:
    """Folders under `root` whose array_dims.csv was written at or after `since`.

    Used after the init run to find where the script really saved, when that is not --save-name.
    """
    found: list[Path] = []
    root_depth = len(root.parts)
    for current, dirs, files in os.walk(root):
        here = Path(current)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS and len(here.parts) - root_depth
            < _SEARCH_DEPTH
        )
        if INIT_OUTPUT in files:
            try:
                if (here / INIT_OUTPUT).stat().st_mtime >= since:
                    found.append(here)
            except FileNotFoundError:
                continue
    return found


def last_write(folder: Path) -> float | None:
    """The newest modification time (time.time()) of a file directly in `folder` (what the watcher sees), or None."""
    newest = None
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False):
                        mtime = entry.stat(follow_symlinks=False).st_mtime
                        newest = mtime if newest is None else max(newest, mtime)
                except OSError:
                    continue
    except OSError:
        return None
    return newest


def is_startup_file(name: str) -> bool:
    """Files the script writes at start-up, before training: a failure after only these is 'before training'."""
    return name == INIT_OUTPUT or name.endswith("_config.json")


MIN_FREE_BYTES = 1024 * 1024


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the disk holding `folder` (or its nearest existing parent);
    None when it cannot be read."""
    target = folder
    while not target.exists() and target != target.parent:
        target = target.parent
    try:
        stat = os.statvfs(target)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def space_problem(folder: Path) -> str | None:
    """Why nothing can be written into `folder` (or, before it exists, the nearest folder above it): its disk has
    less than MIN_FREE_BYTES free; None when it has room (or cannot be read: the writes will say why)."""
    available = free_bytes(folder)
    if available is not None and available < MIN_FREE_BYTES:
        return (f"the disk holding {folder} is full: {available // 1024} KiB free, at least {MIN_FREE_BYTES // 1024} "
                "KiB "
                f"needed: free some space there, or give --save-name a folder on another disk")
    return None


def health_problem(folder: Path) -> str | None:
    """Why training cannot go on writing into `folder` (removed, unwritable, disk full), or None."""
    if not folder.is_dir():
        return f"the save folder {folder} was removed"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the save folder {folder} is not writable any more"
    try:
        free = os.statvfs(folder)
    except OSError as exc:
        return f"the save folder {folder} cannot be read: {exc.strerror}"
    available = free.f_bavail * free.f_frsize
    newest = newest_switch(folder)
    needed = MIN_FREE_BYTES
    if newest is not None:
        try:
            needed = max(needed, (folder / newest).stat().st_size)
        except OSError:
            pass
    if available < needed:
        return f"the disk holding {folder} is full: {available // 1024} KiB free, at least {needed // 1024} KiB needed"
    return None


def wait_shown(path: Path | str, settle: float, content: str | None = None) -> bool:
    """Whether `path` (holding `content`, if given) shows up within `settle` seconds.

    A file another machine wrote may show up late on a shared file system (attribute caching); opening it,
    rather than looking up its name, makes an NFS client check with the server. A pipe in its place is never waited
    on (never shown).
    """
    deadline = time.monotonic() + settle
    while True:
        try:
            text = safeopen.read_bytes(path, safeopen.MAX_RECORD).decode("utf-8", errors="replace")
            if content is None or text.strip() == content:
                return True
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
