"""What one fix is: a function from a file's syntax tree and the finding it answers to the edited tree, or
Unfixable with the one-line reason the report gives when the edit cannot be made safely (never a guess)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import libcst

from pai_launch.doctor.model import Finding, Report


class Unfixable(Exception):
    """The finding has no safe mechanical edit here; str(exc) says why in one line."""


@dataclass(frozen=True)
class FixContext:
    """What a fixer may read: the file being edited, the finding (its line is in that file, or None for a thing
    missing from the script), and the whole report (the other findings, the files doctor read)."""

    path: Path
    finding: Finding
    report: Report


#: A fixer: the file's tree and the context -> the edited tree (the same tree when nothing is left to change, so a
#: second --fix changes nothing); raises Unfixable.
Fixer = Callable[[libcst.Module, FixContext], libcst.Module]
