"""What is settled before a run is composed: the folder adopted for this command, --fresh's move aside, an already
complete folder (nothing to do), the script's check by doctor (its findings are warnings, never a reason not to
start), and a warning where the workers outnumber the cores."""

from __future__ import annotations

import dataclasses
import time

from pai_launch.cli import scriptfile
from pai_launch.core import exitcodes
from pai_launch.doctor.budget import Deadline, OutOfTime
from pai_launch.linux import capacity
from pai_launch.placement.spec import MODULE, LaunchSpec
from pai_launch.savefmt import adoptions, savedir
from pai_launch.supervise.job import plan
from pai_launch.wire import log_events

#: How long the script check before a start may take: the corpus's largest project takes 0.2 s, and a launch must
#: never wait long on a check whose findings are only warnings (`pai-launch doctor` itself has no limit).
DOCTOR_BUDGET_S = 5.0


def settle(spec: LaunchSpec, log, notes: list[tuple[str, dict]]) -> tuple[LaunchSpec, list[tuple[str, dict]]] | int:
    """The spec the run starts with and the warnings it starts with; an exit code instead where there is nothing to
    run (the folder is already complete). LaunchError for a folder that cannot be taken."""
    from pai_launch.supervise.folder.savefolder import move_aside, resolve_adoption

    notes = list(notes)
    spec, adopted = resolve_adoption(spec)
    if adopted is not None:
        log.info(log_events.ADOPTED_FOLDER_USED, save_folder=adopted.save_name, instead_of=adopted.instead_of,
                 recorded_in=str(adoptions.record_path(spec.workdir)))
    if spec.fresh and spec.save_dir.exists():
        if spec.dry_run:
            print(f"--fresh: {spec.save_dir} would be moved aside")
        else:
            moved = move_aside(spec.save_dir)
            log.warning(log_events.SAVE_FOLDER_MOVED_ASIDE, save_folder=str(spec.save_dir), moved_to=str(moved))
    marker_time = savedir.marker_mtime(spec.save_dir)
    if marker_time is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(marker_time))
        log.info(log_events.ALREADY_COMPLETE, save_folder=str(spec.save_dir), marker_written=when,
                 hint="nothing to do; use --fresh (or another --save-name) to train again")
        return exitcodes.COMPLETE
    spec, checked = check_script(spec)
    notes = [*notes, *checked]
    crowded = None if spec.data_parallel else capacity.cores_warning(spec.nproc, capacity.usable_cores())
    if crowded:
        notes.append((log_events.NPROC_ABOVE_CORES, crowded))
    return spec, notes


def check_script(spec: LaunchSpec, deadline: Deadline | None = None) -> tuple[LaunchSpec, list[tuple[str, dict]]]:
    """Run doctor on the script (unless --no-doctor): its errors become warnings for the run's log, never a reason not
    to start; nor is a check that runs out of `deadline` (DOCTOR_BUDGET_S from now). Returns the spec with
    --resume-from settled (as given, else the stage doctor read, else switch) and the warnings, as (event, fields)."""
    stage, notes = None, []
    if spec.doctor:
        stage, notes = _doctor_notes(spec, deadline or Deadline(DOCTOR_BUDGET_S))
    return dataclasses.replace(spec, resume_from=spec.resume_from or stage or "switch"), notes


def _doctor_notes(spec: LaunchSpec, deadline: Deadline) -> tuple[str | None, list[tuple[str, dict]]]:
    """Doctor reads the Python file the run starts in: a module's file; nothing for a program that is not Python."""
    script = scriptfile.python_file(spec)
    if script is None:
        return None, []
    details = f"pai-launch doctor {script if spec.runs_as == MODULE else plan.script_arg(spec)}"
    from pai_launch.doctor.model import DoctorError

    try:
        from pai_launch.doctor import diagnose

        report = diagnose.check_script(script, expected_save_name=spec.save_name, script_args=spec.script_args,
                                       deadline=deadline)
    except OutOfTime as exc:
        return None, [(log_events.SCRIPT_CHECK_GAVE_UP, {
            "script": str(spec.script), "budget_s": deadline.seconds,
            "hint": f"{exc}: the script and the files it imports take longer to check than a start waits; starting "
                    f"anyway, unchecked (details, with no time limit: {details}; --no-doctor skips the check)"})]
    except DoctorError as exc:  # the script cannot be read or parsed
        return None, [(log_events.SCRIPT_CHECK_FAILED, {"error": str(exc),
                                                        "hint": "the script will likely fail to start"})]
    except Exception as exc:  # noqa: BLE001 - whatever goes wrong in the checker, the run still starts
        return None, [(log_events.SCRIPT_CHECK_FAILED, {"error": f"{type(exc).__name__}: {exc}",
                                                        "hint": "a bug in the check; skip it with --no-doctor"})]
    errors = [f for f in report.findings if f.severity == "error"]
    notes = [(log_events.SCRIPT_PROBLEM, {"id": f.id, "path": f.path, "line": f.line, "problem": f.message,
                                          "fix": f.fix})
             for f in errors]
    if errors:
        notes.append((log_events.SCRIPT_CHECK, {
            "script": str(spec.script), "errors": len(errors), "warnings": len(report.findings) - len(errors),
            "hint": f"details: {details}; starting anyway (--no-doctor skips the check)"}))
    return report.resume_stage, notes
