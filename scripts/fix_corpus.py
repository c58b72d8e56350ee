#!/usr/bin/env python3
"""How much of doctor's findings `pai-launch doctor --fix` fixes on the corpus in tests/doctor_scripts/corpus: each
project is fixed in a copy (the files there are never touched), and the table gives, per project, the findings doctor
reports on it as its authors wrote it, the edits the fix mode made, and the findings left (errors in brackets).

    scripts/fix_corpus.py            the table and the totals
    scripts/fix_corpus.py --left     also each finding left, with the reason the fix mode gives
    scripts/fix_corpus.py --run      also runs each fixed project under `pai-launch --nproc 2` (a copy of the whole
                                     project, RUN_TIMEOUT_S each) and says whether it completed or where it stopped

tests/proc/test_fix_corpus.py holds the table of docs/users/doctor-fix.md to what this prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "doctor_scripts" / "corpus"
sys.path.insert(0, str(ROOT / "supervisor"))

from pai_launch.doctor.diagnose import check_script  # noqa: E402  (after the path is set, so it runs from a checkout)
from pai_launch.doctor.model import ERROR  # noqa: E402
from pai_launch.fix import engine, workspace  # noqa: E402
from pai_launch.fix.registry import FIXERS  # noqa: E402


@dataclass
class Fixed:
    """One project's (or the corpus's) findings before, edits made, findings left and the reasons for them."""

    name: str
    before: int = 0
    before_errors: int = 0
    edits: int = 0
    left: int = 0
    left_errors: int = 0
    reasons: tuple[str, ...] = ()
    held_out: bool = False

    def add(self, other: "Fixed") -> None:
        for name in ("before", "before_errors", "edits", "left", "left_errors"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def fix(project: Path) -> Fixed:
    """The fix mode on a copy of one project."""
    expected = json.loads((project / "expected.json").read_text())
    script = project / expected["entry"]
    first = check_script(script)
    space = workspace.Workspace(script, first)
    try:
        outcome = engine.fix_all(lambda: check_script(space.script), space.read, space.write, FIXERS)
        left = outcome.report
        reasons = tuple(f"{f.id}: {engine.reason(outcome, f, FIXERS)}" for f in left.findings)
    finally:
        space.close()
    return Fixed(project.name, len(first.findings), _errors(first), len(outcome.applied), len(left.findings),
                 _errors(left), reasons, bool(expected["held_out"]))


#: How long one fixed project may train under --run before it is stopped and counted as not completed.
RUN_TIMEOUT_S = 300


def run(project: Path) -> str:
    """`completed`, or where the fixed project stopped: pai-launch's closing reason and the last error line its
    init run or workers printed. The fix and the run happen in a copy of the whole project (its data, its modules)."""
    expected = json.loads((project / "expected.json").read_text())
    with tempfile.TemporaryDirectory(prefix="pai-launch-corpus-run-") as folder:
        copy = Path(folder) / project.name
        shutil.copytree(project, copy)
        script = copy / expected["entry"]
        launch = [sys.executable, "-m", "pai_launch"]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "supervisor")}
        try:
            subprocess.run([*launch, "doctor", "--fix", script.name], check=False, cwd=script.parent, env=env,
                           capture_output=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"doctor --fix still working after {RUN_TIMEOUT_S} s"
        try:
            done = subprocess.run([*launch, "--nproc", "2", script.name], check=False, cwd=script.parent, env=env,
                                  capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"still training after {RUN_TIMEOUT_S} s"
    return stop_reason(done.returncode, done.stdout + done.stderr)


def stop_reason(exit_code: int, output: str) -> str:
    """What a run's JSON log lines say about how it ended: `completed`, else the closing reason and last error."""
    reason, error = "", ""
    for line in output.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        if event.get("event") == "run_finished":
            reason = str(event.get("reason", ""))
        if event.get("log_line") and event.get("level") == "error":
            error = str(event["log_line"])
    if exit_code == 0:
        return "completed"
    return "; ".join(part for part in (f"exit {exit_code}", reason, error) if part)


def _errors(report) -> int:
    return sum(f.severity == ERROR for f in report.findings)


def projects() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if (p / "expected.json").is_file())


def _row(f: Fixed) -> str:
    return f"| {f.name} | {f.before} ({f.before_errors}) | {f.edits} | {f.left} ({f.left_errors}) |"


def table(fixed: list[Fixed]) -> str:
    total = Fixed(f"**all {len(fixed)}**")
    rows = ["| project | findings before (errors) | edits made | findings left (errors) |", "|---|---|---|---|"]
    for f in fixed:
        total.add(f)
        rows.append(_row(f))
    rows.append(_row(total))
    share = 1 - total.left / total.before if total.before else 0.0
    errors = 1 - total.left_errors / total.before_errors if total.before_errors else 0.0
    rows += ["", f"After `--fix` alone, {share:.2f} of the findings are gone ({total.before - total.left} of "
             f"{total.before}), and {errors:.2f} of the errors ({total.before_errors - total.left_errors} of "
             f"{total.before_errors}); {sum(f.left_errors == 0 for f in fixed)} of {len(fixed)} projects are left "
             "with no error."]
    held = Fixed("held out")
    for f in fixed:
        if f.held_out:
            held.add(f)
    if held.before:
        rows[-1] += (f" On the held-out projects, {1 - held.left / held.before:.2f} of the findings are gone "
                     f"({held.before - held.left} of {held.before}).")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    fixed = [fix(p) for p in projects()]
    print(table(fixed))
    if "--run" in argv:
        stops = {f.name: run(CORPUS / f.name) for f in fixed}
        completed = sum(stop == "completed" for stop in stops.values())
        print(f"\nUnder pai-launch --nproc 2 after --fix alone, {completed} of {len(fixed)} projects ran to "
              "completion:")
        print("\n".join(f"  {name}: {stop}" for name, stop in stops.items()))
    if "--left" in argv:
        for f in fixed:
            print(f"\n{f.name}:")
            print("\n".join(f"  {r}" for r in f.reasons))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
