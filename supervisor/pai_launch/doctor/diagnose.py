"""`pai-launch doctor`: read a training script (never run it) and report each item of the PerforatedAI DDP protocol
it gets wrong, with the line and the fix, before hours of GPU time find it out.

The script, and the project files it imports (doctor_project), are parsed with `ast`; torch and perforatedai are
never imported. check_script() gives a Report, exit_code() its exit status, render_text() / render_json() its two
outputs. A launch passes a Deadline (doctor.budget): past it, check_script raises OutOfTime.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pai_launch.doctor import (
    checks_api,
    checks_api_missing,
    checks_capacity,
    checks_exits,
    checks_loop,
    checks_rewrap,
    checks_score,
    checks_setup,
    checks_tracker,
)
from pai_launch.doctor import names as doctor_names
from pai_launch.doctor import save as doctor_save
from pai_launch.doctor.budget import UNLIMITED, Deadline, OutOfTime
from pai_launch.doctor.model import ERROR, WARNING, DoctorError, Finding, Report
from pai_launch.doctor.project import Project
from pai_launch.doctor.walker import walk

__all__ = ["EXIT_PARSE_ERROR", "Deadline", "DoctorError", "Finding", "OutOfTime", "Report", "check_script", "exit_code",
           "render_json", "render_text"]

EXIT_PARSE_ERROR = 2  # the script could not be read or parsed
SHOWN_FILES = 8  # the other files read, named in the text output (JSON names them all)

NOT_PAI = Finding("not-perforatedai", WARNING, None,
                  "the script imports neither perforatedai nor pai_launch.training: not a PerforatedAI script, "
                  "so nothing else was checked",
                  "check the training script itself (from perforatedai import utils_perforatedai as UPA)")


def check_script(path: str | Path, *, expected_save_name: str | None = None, script_args: Sequence[str] | None = None,
                 deadline: Deadline = UNLIMITED) -> Report:
    """The findings for one script. `expected_save_name`: pai-launch's --save-name; a readable save folder that
    differs is a finding. `script_args`: the arguments the script runs with (a launch's), to read the save folder
    from its own option; without them such a folder is a note, not a finding. Raises DoctorError when the script cannot
    be read or parsed (a project file it imports
    that cannot be read is skipped, with a note), OutOfTime once `deadline` passes."""
    project = Project(path, deadline)
    flow = walk(project)
    files = tuple(m.shown for m in flow.modules[1:])
    unresolved = tuple(flow.unresolved)
    skipped = _skipped(project)
    if not (doctor_names.uses_module(flow.imports, "perforatedai")
            or doctor_names.uses_module(flow.imports, "pai_launch.training")):
        return Report(str(path), (NOT_PAI,), None, None, files, unresolved, skipped)
    findings: list[Finding] = []
    for check in (checks_api.CHECKS + checks_api_missing.CHECKS + checks_setup.CHECKS + checks_capacity.CHECKS
                  + checks_loop.CHECKS + checks_rewrap.CHECKS + checks_tracker.CHECKS + checks_score.CHECKS
                  + checks_exits.CHECKS
                  + doctor_save.CHECKS):
        deadline.check()
        findings.extend(check(flow))
    findings.extend(doctor_save.check_save_name(flow, expected_save_name, script_args))
    order = {m.shown: n for n, m in enumerate(flow.modules)}
    findings.sort(key=lambda f: (f.line is not None, order.get(f.path or "", 0), f.line or 0))
    return Report(str(path), tuple(findings), doctor_save.save_name(flow)[0], doctor_save.resume_stage(flow), files,
                  unresolved, skipped + _notes(flow, len(files) + 1)
                  + doctor_save.save_name_note(flow, expected_save_name, script_args))


def _skipped(project: Project) -> tuple[str, ...]:
    """A note for each file the imports reach that could not be read at all: the checks ran without it."""
    return tuple(f"skipped {why}" for why in project.skipped.values())


def _notes(flow, files: int) -> tuple[str, ...]:
    if flow.is_ddp():
        return ()
    where = "the script" if files == 1 else f"the {files} files read"
    hint = "; a call it could not follow may hold it" if flow.unresolved else ""
    return (f"DDP checks skipped: no DistributedDataParallel, init_process_group or pai_launch.training.start in "
            f"{where}{hint}",)


def exit_code(report: Report) -> int:
    """0: no errors (warnings allowed); 1: at least one error."""
    return 1 if any(f.severity == ERROR for f in report.findings) else 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(report: Report) -> str:
    errors = sum(f.severity == ERROR for f in report.findings)
    warnings = len(report.findings) - errors
    if not report.findings:
        return "no problems found"
    return ", ".join(part for n, part in ((errors, _count(errors, "error")), (warnings, _count(warnings, "warning")))
                     if n)


def render_text(report: Report) -> str:
    """One entry per finding, `FILE:LINE: severity[id] message` then `    fix: ...`; the other files read, the calls
    not followed and the notes; then the save folder, resume stage and a summary line."""
    lines = []
    for f in report.findings:
        where = f"{f.path or report.script}:{f.line}" if f.line is not None else report.script
        lines.append(f"{where}: {f.severity}[{f.id}] {f.message}")
        lines.append(f"    fix: {f.fix}")
    if report.files:
        more = len(report.files) - SHOWN_FILES
        lines.append(f"also read: {', '.join(report.files[:SHOWN_FILES])}" + (f" and {more} more" if more > 0 else ""))
    for u in report.unresolved:
        lines.append(f"not followed: {u.call} at {u.path}:{u.line} ({u.why})")
    lines.extend(f"note: {note}" for note in report.notes)
    save = report.save_name if report.save_name is not None else "not readable statically"
    stage = {"switch": "the newest switch_N", "latest": '"latest"'}.get(report.resume_stage or "", "not readable")
    lines.append(f"save folder: {save}; resumes from: {stage}")
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def render_json(report: Report) -> str:
    """The report as one JSON object; keys and their order are stable."""
    errors = sum(f.severity == ERROR for f in report.findings)
    return json.dumps({
        "script": report.script,
        "findings": [{"id": f.id, "severity": f.severity, "path": f.path, "line": f.line, "message": f.message,
                      "fix": f.fix} for f in report.findings],
        "save_name": report.save_name,
        "resume_stage": report.resume_stage,
        "errors": errors,
        "warnings": len(report.findings) - errors,
        "files": list(report.files),
        "unresolved": [{"call": u.call, "path": u.path, "line": u.line, "why": u.why} for u in report.unresolved],
        "notes": list(report.notes),
    }, indent=2) + "\n"
