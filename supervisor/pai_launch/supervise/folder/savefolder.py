"""The save folder's faults in words (removed, unusable) and --fresh's move aside: what the session and the command
line say and do about a folder, apart from the session's life in it.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import time
from pathlib import Path

from pai_launch.placement.spec import LaunchSpec
from pai_launch.savefmt import adoptions, safeopen
from pai_launch.savefmt.locks import SaveFolderLock
from pai_launch.wire.errors import SAVE_FOLDER, LaunchError

#: problem()'s `during` for the init run.
INIT_RUN = "the init run"


class SaveFolderError(LaunchError):
    """pai-launch could not do what it must in the save folder (move a torn file aside, adopt a folder)."""

    exit_code = SAVE_FOLDER


def folder_identity(folder: Path) -> tuple[int, int] | None:
    """(device, inode) of the folder, None when it is gone: a folder made again under the same name is another."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def removed_message(folder: Path, during: str | None, remade: bool) -> str:
    """What to say when the save folder went away (pure): what ran meanwhile, and what to do about it."""
    text = f"the save folder {folder} was removed"
    if during == INIT_RUN:
        return (f"{text} while the init run was running: the script deletes its save folder on a fresh start; "
                "start pai-launch with the folder absent, or make the script keep a folder that is there")
    if during is not None:
        return (f"{text} while {during} was "
                f"running{' (a new folder of that name has taken its place)' if remade else ''}: "
                "if the script deletes its save folder on a fresh start, let it do so only in the init run "
                "(--perforate_model_parallel); start again with --fresh to train anew")
    return text + (" (a new folder of that name has taken its place)" if remade else "")


def folder_error(folder: Path, exc: OSError) -> str:
    """Why the save folder cannot be used, with what to do: something that is not a file where pai-launch keeps one
    (a directory, a pipe, a link) is named as what it is; anything else is a permission problem."""
    wrong = exc if isinstance(exc, safeopen.WrongKind) else None
    if wrong is None and exc.errno in (errno.EISDIR, errno.ELOOP, errno.ENXIO) and exc.filename:
        wrong = safeopen.wrong_kind(exc.filename)
    if wrong is not None:
        return f"cannot use the save folder {folder}: {wrong}"
    return f"cannot use the save folder {folder}: {exc.strerror or exc}: check its permissions"


def move_aside(folder: Path) -> Path:
    """--fresh: rename `folder` to `folder.<timestamp>` (never delete), unless a live pai-launch holds it.

    The folder's lock is held (never written) across the rename; StateError names the holder.
    """
    guard = SaveFolderLock(folder)
    guard.acquire(write=False)
    try:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = folder.with_name(f"{folder.name}.{stamp}")
        counter = 1
        while target.exists():
            counter += 1
            target = folder.with_name(f"{folder.name}.{stamp}.{counter}")
        folder.rename(target)
    finally:
        guard.release()
    return target


def resolve_adoption(spec: LaunchSpec) -> tuple[LaunchSpec, adoptions.Adoption | None]:
    """The spec with the folder adopted for this command as its save folder, and that adoption (None: the spec as it
    is). Only without --save-name; StateError as adoptions.adopted_folder says."""
    if not spec.adopt_save_folder:
        return spec, None
    found = adoptions.adopted_folder(spec.workdir, spec.adoption(spec.save_name), spec.fresh)
    if found is None:
        return spec, None
    return dataclasses.replace(spec, save_name=found.save_name, adopted_from=spec.save_name), found
