"""What `pai-launch doctor` reports: findings about one training script, and the error for a script it cannot read.

Plain frozen values, so the checks stay pure functions and the renderers need nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"      # the run will crash or hang
WARNING = "warning"  # the run may crash or hang, or trains wrongly


@dataclass(frozen=True)
class Finding:
    """One item of the PerforatedAI DDP protocol the script gets wrong."""

    id: str           # stable, kebab-case, e.g. "ddp-broadcast-buffers"
    severity: str     # ERROR | WARNING
    line: int | None  # 1-based line in the script; None when something is missing
    message: str      # one line: what is wrong
    fix: str          # one line: what to change
    path: str | None = None  # the file `line` is in (the script, or a project file it imports); None with no line


@dataclass(frozen=True)
class Unresolved:
    """A call that likely holds set-up and that doctor could not see into, so its checks may miss what it does."""

    call: str         # the callee as written
    path: str         # the file the call is in
    line: int | None
    why: str          # e.g. "no file in the project for utils.ddp"


@dataclass(frozen=True)
class Report:
    """Everything the doctor read from one script and the project files it imports."""

    script: str
    findings: tuple[Finding, ...]
    save_name: str | None     # the save folder the script passes to perforate_model, where it can be read statically
    resume_stage: str | None  # "switch" (newest switch_N), "latest", or None when it cannot tell
    files: tuple[str, ...] = ()              # the project files read besides the script
    unresolved: tuple[Unresolved, ...] = ()  # calls not seen into
    notes: tuple[str, ...] = ()              # what was not checked, and why


class DoctorError(Exception):
    """The script cannot be checked (unreadable, not UTF-8, a syntax error); str() is one line naming the file."""
