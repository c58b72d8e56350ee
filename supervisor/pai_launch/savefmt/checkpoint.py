"""Checkpoint integrity without torch: is a switch_N.pt a whole safetensors file (or torch.save archive), or a
checkpoint at all?

PerforatedAI writes its .pt files as safetensors straight to the final name, so a kill or a full
disk mid-write leaves a torn file that every rank then fails to load. A torn newest switch file is
moved into SAVE/.pai-launch/quarantine/ (never deleted) so the script resumes from the one before.
"""

from __future__ import annotations

import json
import os
import struct
import time
import zipfile
from pathlib import Path

from pai_launch.savefmt import safeopen, savedir, statedir

QUARANTINE = Path(".pai-launch") / "quarantine"
#: A header larger than this is not a real one (safetensors itself caps it at 100 MB).
MAX_HEADER = 100 * 1024 * 1024


ZIP_MAGIC = b"PK\x03\x04"
#: A pickle of protocol 2 or later starts with PROTO: what a legacy (non-zip) torch.save file holds.
PICKLE_PROTO = 0x80


def problem(path: Path) -> str | None:
    """Why `path` is not a complete checkpoint, or None when it is (or its format cannot be checked).

    safetensors (what PerforatedAI writes) is checked in full; a torch.save zip file by its central
    directory, which a torn file lacks; a legacy pickle is taken as it is; anything else (text, zeros) is not a
    checkpoint. A pipe or link in its place is not opened (a pipe would block the run).
    """
    try:
        fd = safeopen.open_fd(path)
        try:
            size = os.fstat(fd).st_size
            start = os.read(fd, 9) if size >= 9 else b""
        finally:
            os.close(fd)
    except safeopen.WrongKind as exc:
        return f"{exc.kind}, not a checkpoint file"
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if size < 9:
        return f"{size} bytes: too small to be a checkpoint"
    if start.startswith(ZIP_MAGIC):
        return _zip_problem(path)
    if start[0] == PICKLE_PROTO:
        return None
    if start[8:9] != b"{":
        return "not a checkpoint: neither safetensors nor a torch.save file"
    return _safetensors_problem(path, size)


def _zip_problem(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        return f"torch.save archive is incomplete: {exc}"
    return None if entries else "torch.save archive is empty: no tensors in it"


def _safetensors_problem(path: Path, size: int) -> str | None:
    try:
        with open(path, "rb") as handle:
            (header_len,) = struct.unpack("<Q", handle.read(8))
            if header_len > MAX_HEADER or 8 + header_len > size:
                return f"header length {header_len} does not fit the file's {size} bytes"
            header = json.loads(handle.read(header_len))
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "header is not valid JSON"
    if not isinstance(header, dict):
        return "header is not a JSON object"
    data_len = size - 8 - header_len
    end_max = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):  # a bool is
            # no offset
            return f"tensor {name!r} has no valid data_offsets"
        begin, end = offsets
        if not 0 <= begin <= end <= data_len:
            return f"tensor {name!r} needs bytes {begin}..{end} but the file holds {data_len}"
        end_max = max(end_max, end)
    if end_max != data_len:
        return f"data is {data_len} bytes but the tensors cover {end_max}"
    return None


def quarantine(save_dir: Path, name: str, now: float | None = None) -> Path:
    """Move a bad file aside into SAVE/.pai-launch/quarantine/, keeping every earlier copy."""
    folder = statedir.subfolder(save_dir, QUARANTINE.name)  # UnsafeStateDir: a link or another user's folder there
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    target = folder / f"{name}.{stamp}"
    counter = 1
    while os.path.lexists(target):
        counter += 1
        target = folder / f"{name}.{stamp}.{counter}"
    os.replace(save_dir / name, target)
    return target


def newest_valid_switch(save_dir: Path, on_quarantine) -> str | None:
    """Quarantine torn switch files from the newest down until a whole one is newest; return its name.

    `on_quarantine(name, problem, moved_to)` is told of each file moved aside.
    """
    while True:
        newest = savedir.newest_switch(save_dir)
        if newest is None:
            return None
        why = problem(save_dir / newest)
        if why is None:
            return newest
        moved = quarantine(save_dir, newest)
        on_quarantine(newest, why, moved)


#: What PerforatedAI rewrites every epoch (rank 0), and scripts that resume mid-generation load.
LATEST = "latest.pt"


def whole_latest(save_dir: Path, on_quarantine) -> bool:
    """SAVE/latest.pt is there and whole; a torn one is moved aside (`on_quarantine` told) and counts as absent."""
    path = save_dir / LATEST
    if not os.path.lexists(path):
        return False
    why = problem(path)
    if why is None:
        return True
    on_quarantine(LATEST, why, quarantine(save_dir, LATEST))
    return False
