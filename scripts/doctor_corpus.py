#!/usr/bin/env python3
"""How well `pai-launch doctor` reads real PerforatedAI projects: its precision and recall on the corpus in
tests/doctor_scripts/corpus (public projects kept as they were written, each with its source, licence and the
problems a correct check reports, in expected.json).

    scripts/doctor_corpus.py            the table, one row a project, the totals, and precision and recall for
                                        each style of script and for the held-out and tuned parts
    scripts/doctor_corpus.py --details  also each project's missed problems and false alarms
    scripts/doctor_corpus.py --tuned    the details of the tuned projects only: what to read when changing doctor,
                                        so that the held-out part stays unseen

A finding matches a true problem with the same id; where both name a line, the file and line must agree (or be one
of the problem's `also_at` places). Each true problem and each finding is matched at most once. A problem whose id
is not one of doctor's checks (the ids of the table of checks in docs/users/doctor.md, doctor_ids()) counts against
recall over all
problems, not against recall over doctor's checks; a check added later moves its problems in scope by itself, with
no ground truth edited.

Each project's expected.json names its `style` (STYLES: how the script drives PerforatedAI and DDP) and whether it is
`held_out`: a project doctor's checks were not tuned on, chosen by a hash of its name (see
tests/unit/test_doctor_corpus.py), so its scores say how doctor reads projects it was not written against.
tests/unit/test_doctor_corpus.py holds the table of docs/users/doctor.md to what this prints.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "doctor_scripts" / "corpus"
sys.path.insert(0, str(ROOT / "supervisor"))

from pai_launch.doctor.diagnose import check_script  # noqa: E402  (after the path is set, so it runs from a checkout)
from pai_launch.doctor.model import ERROR  # noqa: E402

STYLES = {
    "guide": "the published DDP pattern: UPA.perforate_model and GPA.pai_tracker under torchrun, exiting at each "
             "restructure to be relaunched",
    "tracker-object": "drives the tracker as an object (PAINeuronModuleTracker(...), tracker = GPA.pai_tracker, "
                      "utils_perforatedai's GPA)",
    "in-process": "DDP that restructures in its own process, without exiting",
    "data-parallel": "torch.nn.DataParallel",
    "single-process": "no DDP",
}


CHECKS_TABLE = "| id | severity | what it checks |"


@functools.cache
def doctor_ids() -> frozenset[str]:
    """The finding ids of doctor's checks: the first column of the table of checks in docs/users/doctor.md."""
    lines = (ROOT / "docs" / "users" / "doctor.md").read_text().splitlines()
    rows = lines[lines.index(CHECKS_TABLE) + 2:]
    ids = set()
    for row in itertools.takewhile(lambda line: line.startswith("|"), rows):
        ids.update(re.findall(r"`([a-z][a-z0-9-]+)`", row.split("|")[1]))
    return frozenset(ids)


@dataclass
class Score:
    """One project's (or the corpus's) matched problems, missed problems and false alarms."""

    name: str
    style: str = ""
    projects: int = 0
    held_out: int = 0  # projects held out
    files: int = 0
    ddp: int = 0  # projects that use DDP
    problems: list[dict] = field(default_factory=list)
    found: list[dict] = field(default_factory=list)
    missed: list[dict] = field(default_factory=list)
    false_alarms: list[dict] = field(default_factory=list)

    @property
    def in_scope(self) -> list[dict]:
        return [p for p in self.problems if p["id"] in doctor_ids()]

    @property
    def false_errors(self) -> list[dict]:
        return [f for f in self.false_alarms if f["severity"] == ERROR]

    @property
    def found_in_scope(self) -> list[dict]:
        return [p for p in self.found if p["id"] in doctor_ids()]

    @property
    def reported(self) -> int:
        return len(self.found) + len(self.false_alarms)

    def add(self, other: "Score") -> None:
        self.projects += other.projects
        self.held_out += other.held_out
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
    result = Score(project.name, style=expected["style"], held_out=int(bool(expected["held_out"])), projects=1,
                   files=1 + len(report.files), problems=list(expected["findings"]),
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
    """The table of docs/users/doctor.md: a row a project, then the totals with precision and recall, then the same for
    each style
    and for the held-out and the tuned parts."""
    total = Score(f"**all {len(scores)}**")
    rows = ["| project | style | held out | DDP | files read | true problems (in doctor's checks) | found | missed | "
            "false alarms (errors) |", "|---|---|---|---|---|---|---|---|---|"]
    for s in scores:
        total.add(s)
        rows.append(_row(s))
    rows.append(_row(total, totals=True))
    rows.append("")
    rows.append(f"Precision {_ratio(len(total.found), total.reported)} ({len(total.found)} of {total.reported} "
                f"findings are true problems; false errors: {len(total.false_errors)}). Recall "
                f"{_ratio(len(total.found), len(total.problems))} over all {len(total.problems)} true problems, "
                f"{_ratio(len(total.found_in_scope), len(total.in_scope))} over the {len(total.in_scope)} that doctor "
                f"has a check for.")
    rows.append("")
    rows += ["| part | projects | true problems (in doctor's checks) | found | false alarms (errors) | precision | "
             "recall, all (over doctor's checks) |", "|---|---|---|---|---|---|---|"]
    parts = [(f"style `{style}`", [s for s in scores if s.style == style]) for style in STYLES]
    parts.append(("tuned", [s for s in scores if not s.held_out]))
    parts.append(("held out", [s for s in scores if s.held_out]))
    for name, members in parts:
        part = Score(name)
        for s in members:
            part.add(s)
        rows.append(f"| {name} | {part.projects} | {len(part.problems)} ({len(part.in_scope)}) | {len(part.found)} | "
                    f"{len(part.false_alarms)} ({len(part.false_errors)}) | {_ratio(len(part.found), part.reported)} | "
                    f"{_ratio(len(part.found), len(part.problems))} "
                    f"({_ratio(len(part.found_in_scope), len(part.in_scope))}) |")
    return "\n".join(rows)


def _row(s: Score, totals: bool = False) -> str:
    ddp, held_out = (str(s.ddp), str(s.held_out)) if totals else (("no", "yes")[s.ddp], ("no", "yes")[s.held_out])
    return (f"| {s.name} | {s.style} | {held_out} | {ddp} | {s.files} | {len(s.problems)} ({len(s.in_scope)}) | "
            f"{len(s.found)} | {len(s.missed)} | {len(s.false_alarms)} ({len(s.false_errors)}) |")


def details(scores: list[Score]) -> str:
    lines = []
    for s in scores:
        lines.append(f"{s.name}:")
        lines += [f"  missed {p['id']} at {p['file']}:{p.get('line')}{'' if p['id'] in doctor_ids() else ' (no check)'}"
                  for p in s.missed]
        lines += [f"  false {f['severity']} {f['id']} at {f['at']}" for f in s.false_alarms]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    scores = [score(p) for p in projects()]
    print(table(scores))
    if "--details" in argv or "--tuned" in argv:
        print()
        print(details([s for s in scores if not ("--tuned" in argv and s.held_out)]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
