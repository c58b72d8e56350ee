"""The fix loop: one fix at a time, doctor again after each, so every fixer reads line numbers that are true for
the file it edits. An edit is kept only when it clears (one of) its finding; one that does not, or that leaves the
file unreadable, is undone and the finding is left with the reason.

Pure over three callables (check, read, write): the files and doctor's runs belong to the caller.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import libcst

from pai_launch.doctor.model import DoctorError, Finding, Report
from pai_launch.fix.edit import FixContext, Fixer, Unfixable

NO_FIXER = "no mechanical fix"
MAX_ROUNDS = 200  # a bound on the loop whatever the fixers do


@dataclass
class Outcome:
    """What the loop did: the fixes kept (id, file), the reasons per (id, file) for what it could not fix, in the
    order of those findings in the file, and doctor's report on the result."""

    report: Report
    applied: list[tuple[str, str]] = field(default_factory=list)
    reasons: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def where(report: Report, finding: Finding) -> str:
    """The file a finding is in: its own path, or the script for something missing from it."""
    return finding.path or report.script


def _key(report: Report, finding: Finding) -> tuple[str, str]:
    return finding.id, where(report, finding)


def next_finding(report: Report, fixers: Mapping[str, Fixer], reasons: Mapping) -> Finding | None:
    """The first finding with a fixer not yet given up on: per (id, file), the ones given up on are the first."""
    for finding in report.findings:
        if finding.id not in fixers:
            continue
        key = _key(report, finding)
        same = [f for f in report.findings if _key(report, f) == key]
        if len(same) > len(reasons.get(key, ())):
            return same[len(reasons.get(key, ()))]
    return None


@functools.lru_cache(maxsize=8)
def _parse(source: str) -> libcst.Module:
    """One tree per text: the fixers tried on a file that has not changed share it, and the positions read from it
    (fix.cst.metadata). Trees are immutable, so sharing is safe."""
    return libcst.parse_module(source)


def apply(fixer: Fixer, source: str, ctx: FixContext) -> str:
    """The fixer on the file's text; the text it gives back (the same text when it changed nothing)."""
    try:
        module = _parse(source)
    except libcst.ParserSyntaxError as exc:
        raise Unfixable(f"libcst cannot parse {ctx.path.name}: {str(exc).splitlines()[0]}") from None
    return fixer(module, ctx).code


def _count(report: Report, key: tuple[str, str]) -> int:
    return sum(_key(report, f) == key for f in report.findings)


def fix_all(check: Callable[[], Report], read: Callable[[Path], str], write: Callable[[Path, str], None],
            fixers: Mapping[str, Fixer]) -> Outcome:
    outcome = Outcome(check())
    for _round in range(MAX_ROUNDS):
        report = outcome.report
        finding = next_finding(report, fixers, outcome.reasons)
        if finding is None:
            break
        key = _key(report, finding)
        path = Path(key[1])
        before = read(path)
        why = None
        try:
            after = apply(fixers[finding.id], before, FixContext(path, finding, report))
        except Unfixable as exc:
            after, why = before, str(exc)
        except Exception as exc:  # noqa: BLE001 - a fixer's own failure leaves the finding, said, and the other fixes go on
            after, why = before, f"the fix failed ({type(exc).__name__}: {exc})"
        if why is None and after == before:
            why = "the fixer found nothing to change"
        if why is None:
            write(path, after)
            try:
                again = check()
            except DoctorError as exc:
                again, why = None, f"the edit would leave the file unreadable ({exc})"
            if again is not None and _count(again, key) >= _count(report, key):
                why = "the edit did not clear the finding, so it was undone"
            if why is not None:
                write(path, before)
            else:
                outcome.applied.append(key)
                outcome.report = again
                outcome.reasons.clear()  # a fix may make another possible (the flags, for the init run's fixes)
                continue
        outcome.reasons.setdefault(key, []).append(why)
    return outcome


def reason(outcome: Outcome, finding: Finding, fixers: Mapping[str, Fixer]) -> str:
    """Why a finding left after the loop was not fixed, in one line."""
    if finding.id not in fixers:
        return NO_FIXER
    key = _key(outcome.report, finding)
    same = [f for f in outcome.report.findings if _key(outcome.report, f) == key]
    given = outcome.reasons.get(key, [])
    index = same.index(finding)
    return given[index] if index < len(given) else "not tried: the fix loop stopped"
