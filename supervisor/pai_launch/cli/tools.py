"""`pai-launch doctor`, `pai-launch status` and `pai-launch env`: tools with their own command lines, read-only but
for `doctor --fix` (pai_launch.fix, imported only then).

They start nothing and never import torch. Usage errors are one line and exit 2, as for the launch command.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

try:  # recent typer carries its own copy of click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click.exceptions import UsageError

from pai_launch.core import exitcodes
from pai_launch.placement import pathnames, seconds

tools = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
)


@tools.command(epilog="Exit codes: 0 no errors (warnings allowed; with --fix/--diff: none left); 1 errors found "
               "(left); "
                      "2 the script cannot be read or parsed, or bad usage; 3 --fix refused: a file to change has "
                      "uncommitted changes in git (--force).")
def doctor(
    script: Annotated[Path, typer.Argument(help="The training script to check (read, never run).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object instead of text.")] = False,
    save_name: Annotated[Optional[str], typer.Option(
        "--save-name", envvar="PAI_LAUNCH_SAVE_NAME", show_default=False,
        help="The --save-name you launch with: a script that saves elsewhere is reported.")] = None,
    fix: Annotated[bool, typer.Option(
        "--fix", help="Make the fixes that have a mechanical edit in the files (each original kept as FILE.orig), "
                      "then say what is left and why.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print --fix's edits as a unified diff; change "
                                       "nothing.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="With --fix: also edit files with uncommitted changes in git.")] = False,
) -> int:
    """Check a training script against the PerforatedAI DDP protocol, with line numbers and fixes."""
    from pai_launch.doctor import diagnose as checker

    too_long = pathnames.problem("doctor", script)
    clash = "--json cannot be combined with --fix or --diff" if as_json and (fix or diff) else \
        "--force is for --fix" if force and not fix else None
    if too_long or clash:
        _error(too_long or clash)
        return exitcodes.USAGE
    if fix or diff:
        from pai_launch.fix import run as fixing  # libcst: only here, never at a launch's start-up

        return fixing.main(script, diff=diff, force=force, save_name=save_name)
    try:
        report = checker.check_script(script, expected_save_name=save_name)
    except checker.DoctorError as exc:
        _error(str(exc))
        return checker.EXIT_PARSE_ERROR
    print(checker.render_json(report) if as_json else checker.render_text(report))
    return checker.exit_code(report)


@tools.command(epilog="Exit codes: 0 shown; 2 SAVE is not a save folder (or --timeline cannot be drawn).")
def status(
    save: Annotated[Optional[Path], typer.Argument(
        help="The save folder (default: PAI, or the folder pai-launch adopted here).", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object instead of text.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Redraw every --interval seconds until the run ends or "
                                        "Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between redraws with --watch.")] = 2.0,
    timeline: Annotated[Optional[Path], typer.Option(
        "--timeline", show_default=False, help="Also draw the run (generations, gaps, failures, score) into "
        "FILE.png.")] = None,
) -> int:
    """Where a run stands, from its save folder's files: generations, dendrites, best score, failures, the
    supervisor."""
    from pai_launch.status import gather as run_status

    bad = seconds.problem("--interval", interval) or (pathnames.problem("status", save) if save is not None else None) \
        or (pathnames.problem("--timeline", timeline) if timeline is not None else None)
    if bad:
        _error(bad)
        return exitcodes.USAGE
    return run_status.main(save or run_status.default_folder(Path.cwd()), as_json=as_json, watch=watch,
                           timeline=timeline, interval=interval)


@tools.command("env", epilog="Exit codes: 0 shown (torch missing or its probe failing included: that is what the "
                              "report is for); 2 bad usage, e.g. --python names no interpreter.")
def env(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object instead of text.")] = False,
    python: Annotated[Optional[str], typer.Option(
        "--python", show_default=False,
        help="The interpreter whose torch, CUDA and perforatedai to report. [default: pai-launch's own, which runs "
             "the training]")] = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds to wait for that interpreter to import torch and answer.")] = 60.0,
) -> int:
    """What a bug report needs: versions, the interpreter, CUDA and GPUs, limits, and what a launch here would do."""
    from pai_launch.cli import envfacts
    from pai_launch.envreport import interpreter, render

    bad_timeout = seconds.problem("--timeout", timeout)
    if bad_timeout:
        _error(bad_timeout)
        return exitcodes.USAGE
    try:
        found = interpreter.resolve(sys.executable if python is None else python)
    except interpreter.NoInterpreter as exc:
        _error(str(exc))
        return exitcodes.USAGE
    facts = envfacts.gather(found, timeout)
    print(render.render_json(facts) if as_json else render.render_text(facts))
    return 0


def _error(message: str) -> None:
    print(f"pai-launch: error: {message}", file=sys.stderr)


def run_tool(argv: list[str]) -> int:
    """Run `doctor ...`, `status ...` or `env ...`: one-line usage errors, exit 2."""
    command = typer.main.get_command(tools)
    try:
        result = command.main(args=argv, prog_name="pai-launch", standalone_mode=False)
    except UsageError as exc:
        _error(f"{exc.format_message()} (see pai-launch {argv[0]} --help)")
        return exitcodes.USAGE
    except typer.Abort:
        return exitcodes.for_signal(2)
    return result if isinstance(result, int) else 0
