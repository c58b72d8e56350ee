"""`pai-launch doctor --fix` / `--diff`: doctor, the fix loop on a copy, then the diff or the files written back
beside FILE.orig, and what is left with why (one line each).

Exit codes: 0 no error left (warnings allowed); 1 errors left; 2 the script cannot be read (as doctor); 3 refused:
a file to change has uncommitted changes in git (nothing written; --force writes anyway), or it changed while it was
being fixed.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import TextIO

from pai_launch.doctor import diagnose
from pai_launch.doctor.model import ERROR, Report
from pai_launch.fix import engine, workspace
from pai_launch.fix.registry import FIXERS

EXIT_REFUSED = 3


def main(script: Path, *, diff: bool, force: bool, save_name: str | None = None,
         out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        first = diagnose.check_script(script, expected_save_name=save_name)
    except diagnose.DoctorError as exc:
        print(f"pai-launch: error: {exc}", file=err)
        return diagnose.EXIT_PARSE_ERROR
    space = workspace.Workspace(script, first)
    try:
        outcome = engine.fix_all(lambda: diagnose.check_script(space.script, expected_save_name=save_name),
                                 space.read, space.write, FIXERS)
        changes = space.changes()
        left = space.in_project(outcome.report)
        fixed = [f"{verb(diff)} {space.shown(path)}: {ident}" for ident, path in outcome.applied]
        reasons = [reason_line(left, finding, engine.reason(outcome, raw, FIXERS))
                   for finding, raw in zip(left.findings, outcome.report.findings)]
    finally:
        space.close()
    info = err if diff else out
    if diff:
        out.write(render_diff(changes))
    else:
        moved = [c.shown for c, _text in changes if not workspace.unchanged(c)]
        dirty = [c.shown for c, _text in changes if workspace.uncommitted(c.real)]
        if moved:
            print(f"pai-launch: error: {moved[0]} changed while it was being fixed: run --fix again", file=err)
            return EXIT_REFUSED
        if dirty and not force:
            print(f"pai-launch: error: {dirty[0]} has uncommitted changes: commit them, or pass --force "
                  "(the original is kept as FILE.orig either way)", file=err)
            return EXIT_REFUSED
        for copy, text in changes:
            kept = workspace.backup(copy.real)
            workspace.write_back(copy.real, text)
            print(f"the original is {'in' if kept else 'kept as it was in'} {copy.shown}.orig", file=info)
    for line in fixed + reasons:
        print(line, file=info)
    print(summary(len(fixed), left, diff), file=info)
    return diagnose.exit_code(left)


def verb(diff: bool) -> str:
    return "would fix" if diff else "fixed"


def reason_line(report: Report, finding, why: str) -> str:
    place = f"{finding.path or report.script}:{finding.line}" if finding.line is not None else report.script
    return f"left {place}: {finding.severity}[{finding.id}] {why}"


def summary(fixed: int, left: Report, diff: bool) -> str:
    errors = sum(f.severity == ERROR for f in left.findings)
    warnings = len(left.findings) - errors
    done = f"{fixed} {'fix' if fixed == 1 else 'fixes'}{' to make' if diff else ' made'}" if fixed else "nothing to fix"
    rest = ", ".join(f"{n} {word}{'' if n == 1 else 's'}" for n, word in ((errors, "error"), (warnings, "warning"))
                     if n)
    return f"{done}; {rest + ' left' if rest else 'no problems left'}"


def render_diff(changes) -> str:
    """A unified diff per changed file, named as doctor names it (`patch -p0` applies it)."""
    parts = []
    for copy, text in changes:
        parts.extend(difflib.unified_diff(copy.text.splitlines(keepends=True), text.splitlines(keepends=True),
                                          fromfile=copy.shown, tofile=copy.shown))
    return "".join(p if p.endswith("\n") else p + "\n\\ No newline at end of file\n" for p in parts)
