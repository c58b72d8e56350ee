"""The save folder at a generation's two ends: which checkpoint it starts from (torn ones moved aside first), and what
it left, read once when it ends (the judgement and the log lines all take that one value). Files only."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

from pai_launch.core.failure import Failure
from pai_launch.savefmt import checkpoint, savedir
from pai_launch.savefmt.pai_files import folder_facts, folder_limit
from pai_launch.savefmt.record import StateError
from pai_launch.supervise.folder.savefolder import SaveFolderError


@dataclasses.dataclass(frozen=True)
class FolderAtEnd:
    """What a generation's end is judged by, from one read of the save folder."""

    #: The completion marker is there.
    complete: bool
    #: switch_*.pt files written or rewritten since the generation started.
    progressed: tuple[str, ...]
    #: Of those, the ones no resume could load, with why (node 0 only).
    unusable: Mapping[str, str]
    #: Dendrites in the model (savefmt.pai_files' one count), and the most the script's settings allow (and where
    #: that limit comes from).
    dendrites: int
    max_dendrites: int | None
    max_from: str
    #: The switch file the generation was started from, as node 0 chose it.
    loaded_switch: str | None

    def dendrite_facts(self) -> dict:
        """The dendrites in the model and the most the script's settings allow, for the machine to record and to name
        a run that grows past its maximum (given once a generation made progress, or a DataParallel process ended)."""
        return {"dendrites": self.dendrites, "max_dendrites": self.max_dendrites, "max_from": self.max_from}

    def checked_progress(self, failures: tuple[Failure, ...],
                         generation: int) -> tuple[tuple[str, ...], tuple[Failure, ...]]:
        """Progress is only switch files a resume can load: those that fail the checkpoint check are dropped (the next
        start moves them aside), and a generation that wrote nothing else, and did not fail otherwise, failed."""
        bad = self.unusable
        if not bad:
            return self.progressed, failures
        kept = tuple(name for name in self.progressed if name not in bad)
        if kept or failures or self.complete:
            return kept, failures
        listed = "; ".join(f"{name}: {why}" for name, why in bad.items())
        detail = f"generation {generation} wrote no usable switch file ({listed}): nothing to resume from"
        return kept, (Failure.checkpoint(detail),)


def resume_choice(save_dir: Path, save_name: str, *, latest: bool, node: int,
                  on_quarantine: Callable[[str, str, Path], None]) -> tuple[str | None, str | None]:
    """(--pai_load_folder's value, the switch file it loads): the save folder once its newest switch file is whole
    (torn ones are moved aside, `on_quarantine(name, problem, moved_to)` told of each); None when no switch file is
    left. Only node 0 moves anything: another node takes the folder as node 0 left it. With --resume-from latest
    (`latest`) the script resumes from SAVE/latest.pt too (written every epoch, before a restructure's switch file):
    the flag goes with a whole latest.pt as well, so a crash before the first switch file resumes mid-generation."""
    if node != 0:  # the file node 0 resumes from, as this node sees it: every node judges a failure alike
        there = latest and (save_dir / checkpoint.LATEST).exists()
        loaded = savedir.newest_switch(save_dir)
        return (save_name if there or loaded is not None else None), loaded
    try:
        if latest and checkpoint.whole_latest(save_dir, on_quarantine):
            return save_name, None
        newest = checkpoint.newest_valid_switch(save_dir, on_quarantine)
    except (OSError, StateError) as exc:
        raise SaveFolderError(f"cannot move a torn checkpoint aside in {save_dir}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from exc
    return (save_name if newest is not None else None), newest


def read_at_end(save_dir: Path, progressed: tuple[str, ...], *, node: int, loaded_switch: str | None) -> FolderAtEnd:
    """The folder as the generation that just ended left it (`progressed`: its switch files written since it started).
    Only node 0 checks the switch files (rank 0 wrote them there; another node's view of a shared folder may lag
    behind the writes)."""
    found = {name: checkpoint.problem(save_dir / name) for name in progressed} if node == 0 else {}
    unusable = {name: why for name, why in found.items() if why is not None}
    most, source = folder_limit(save_dir)
    return FolderAtEnd(complete=savedir.marker_mtime(save_dir) is not None, progressed=progressed, unusable=unusable,
                       dendrites=folder_facts(save_dir)[0], max_dendrites=most, max_from=source,
                       loaded_switch=loaded_switch)
