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


@dataclass(frozen=True)
class Report:
    """Everything the doctor read from one script."""

    script: str
    findings: tuple[Finding, ...]
    save_name: str | None     # the save folder the script passes to perforate_model, where it can be read statically
    resume_stage: str | None  # "switch" (newest switch_N), "latest", or None when it cannot tell


class DoctorError(Exception):
    """The script cannot be checked (unreadable, not UTF-8, a syntax error); str() is one line naming the file."""
