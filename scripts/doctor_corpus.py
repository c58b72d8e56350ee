#!/usr/bin/env python3
"""How well `pai-launch doctor` reads real PerforatedAI projects: its precision and recall on the corpus in
tests/doctor_scripts/corpus (public projects kept as they were written, each with its source, licence and the
problems a correct check reports, in expected.json).

    scripts/doctor_corpus.py            the table, one row a project, and the totals
    scripts/doctor_corpus.py --details  also each project's missed problems and false alarms

A finding matches a true problem with the same id; where both name a line, the file and line must agree (or be one
of the problem's `also_at` places). Each true problem and each finding is matched at most once. Problems marked
`"new": true` are ones doctor has no check for: they count against recall over all problems, not against recall
over doctor's checks. tests/unit/test_doctor_corpus.py holds the README's table to what this prints.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "doctor_scripts" / "corpus"
sys.path.insert(0, str(ROOT / "supervisor"))

from pai_launch.doctor.diagnose import check_script  # noqa: E402  (after the path is set, so it runs from a checkout)
from pai_launch.doctor.model import ERROR  # noqa: E402


@dataclass
class Score:
    """One project's (or the corpus's) matched problems, missed problems and false alarms."""

    name: str
    files: int = 0
    ddp: int = 0  # projects that use DDP
    problems: list[dict] = field(default_factory=list)
    found: list[dict] = field(default_factory=list)
    missed: list[dict] = field(default_factory=list)
    false_alarms: list[dict] = field(default_factory=list)

    @property
    def in_scope(self) -> list[dict]:
        return [p for p in self.problems if not p.get("new")]

    @property
    def false_errors(self) -> list[dict]:
        return [f for f in self.false_alarms if f["severity"] == ERROR]

    def add(self, other: "Score") -> None:
        self.files += other.files
        self.ddp += other.ddp
        for name in ("problems", "found", "missed", "false_alarms"):
            getattr(self, name).extend(getattr(other, name))


def _place(path: str | None, line: int | None, project: Path) -> str | None:
    if path is None or line is None:
        return None
    try:
        shown = Path(path).resolve().relative_to(project)
    except ValueError:
        shown = Path(path)
    return f"{shown.as_posix()}:{line}"


def _matches(problem: dict, finding: dict, project: Path) -> bool:
    if problem["id"] != finding["id"]:
        return False
    at = _place(finding["path"], finding["line"], project)
    if problem.get("line") is None or at is None:
        return True
    return at in {f"{problem['file']}:{problem['line']}", *problem.get("also_at", ())}


def score(project: Path) -> Score:
    """Doctor's findings on one corpus project against its expected.json."""
    expected = json.loads((project / "expected.json").read_text())
    report = check_script(project / expected["entry"])
    findings = [{"id": f.id, "severity": f.severity, "path": f.path, "line": f.line} for f in report.findings]
    result = Score(project.name, files=1 + len(report.files), problems=list(expected["findings"]),
                   ddp=int(bool(expected.get("ddp", False))))
    unmatched = list(findings)
    for problem in expected["findings"]:
        hit = next((f for f in unmatched if _matches(problem, f, project)), None)
        if hit is None:
            result.missed.append(problem)
        else:
            unmatched.remove(hit)
            result.found.append(problem)
    result.false_alarms = [{**f, "at": _place(f["path"], f["line"], project)} for f in unmatched]
    return result


def projects() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if (p / "expected.json").is_file())


def _ratio(part: int, whole: int) -> str:
    return f"{part / whole:.2f}" if whole else "-"


def table(scores: list[Score]) -> str:
    """The README's table: a row a project, then the totals with precision and recall."""
    total = Score(f"**all {len(scores)}**")
    rows = ["| project | DDP | files read | true problems (in doctor's checks) | found | missed | false alarms "
            "(errors) |", "|---|---|---|---|---|---|---|"]
    for s in scores:
        total.add(s)
        rows.append(_row(s))
    rows.append(_row(total))
    reported = len(total.found) + len(total.false_alarms)
    found_in_scope = len([p for p in total.found if not p.get("new")])
    rows.append("")
    rows.append(f"Precision {_ratio(len(total.found), reported)} ({len(total.found)} of {reported} findings are "
                f"true problems; false errors: {len(total.false_errors)}). Recall {_ratio(len(total.found), len(total.problems))} "
                f"over all {len(total.problems)} true problems, {_ratio(found_in_scope, len(total.in_scope))} over the "
                f"{len(total.in_scope)} that doctor has a check for.")
    return "\n".join(rows)


def _row(s: Score) -> str:
    ddp = {0: "no", 1: "yes"}.get(s.ddp, str(s.ddp))
    return (f"| {s.name} | {ddp} | {s.files} | {len(s.problems)} ({len(s.in_scope)}) | "
            f"{len(s.found)} | {len(s.missed)} | {len(s.false_alarms)} ({len(s.false_errors)}) |")


def details(scores: list[Score]) -> str:
    lines = []
    for s in scores:
        lines.append(f"{s.name}:")
        lines += [f"  missed {p['id']} at {p['file']}:{p.get('line')}{' (no check)' if p.get('new') else ''}"
                  for p in s.missed]
        lines += [f"  false {f['severity']} {f['id']} at {f['at']}" for f in s.false_alarms]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    scores = [score(p) for p in projects()]
    print(table(scores))
    if "--details" in argv:
        print()
        print(details(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
