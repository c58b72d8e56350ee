"""The command line: declare the options, build a LaunchSpec from them (cli.specbuilder), preflight it, then hand
over to the runner.

Everything after SCRIPT belongs to the script, as with torchrun. This is also the outer exit-code
boundary: usage errors are one line and exit 2, and a bug anywhere is exit 70 (INTERNAL_ERROR)
with every process we started stopped, never a bare traceback.
"""

from __future__ import annotations

import inspect
import os
import queue
import sys
import traceback
from dataclasses import dataclass, field

import typer

try:  # recent typer carries its own copy of click
    from typer._click.core import ParameterSource
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer on top of click
    from click.core import ParameterSource
    from click.exceptions import UsageError

from pai_launch.cli import completion, declared, specbuilder, torchrun_flags
from pai_launch.cli.preflight import preflight
from pai_launch.core import exitcodes
from pai_launch.linux import procs
from pai_launch.wire.errors import LaunchError

EPILOG = (
    "Example: pai-launch --nproc 8 train.py --epochs 100\n\n"
    "Exit codes: "
    + "; ".join(f"{code} {meaning}" for code, meaning in exitcodes.TABLE)
    + ".\n\nEvery option but --fresh may also be set as PAI_LAUNCH_<NAME> in the environment (e.g. "
    "PAI_LAUNCH_NPROC=8); "
    "the command line wins.\n\nEvery process gets PAI_LAUNCH_RUN_ID (one id for the whole run) and "
    "PAI_LAUNCH_GENERATION "
    "(0 for the init run, then 1, 2, ...).\n\n"
    "Tools: pai-launch doctor SCRIPT [--json] checks a script against the PerforatedAI DDP protocol; "
    "pai-launch status [SAVE] [--json] [--watch] [--timeline FILE.png] shows where a run stands; "
    "pai-launch env [--json] [--python PATH] prints what a bug report needs. "
    "(A script named doctor, status or env runs as ./doctor, ./status or ./env.)"
)

app = typer.Typer(
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"], "allow_interspersed_args": False},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def launch(ctx: typer.Context, **options) -> int:
    """Run PerforatedAI DistributedDataParallel training to completion: the init run, then one generation of
    workers per dendrite restructure, relaunched with --pai_load_folder until SAVE/.training_complete appears."""
    typed = specbuilder.CommandLine.of(options)
    invocation: Invocation = ctx.obj  # from run_command_line
    host = specbuilder.Host.here()
    try:
        built = specbuilder.build(typed, host)
        preflight(built.spec, chosen_nproc=built.chosen_nproc, env=host.env, physical=host.physical_gpus)
    except LaunchError as exc:
        _error(str(exc))
        return exc.exit_code
    pet = _used_from_environment(ctx, invocation.pet)
    if built.spec.dry_run:
        for line in (_taken("from torchrun's options", invocation.torchrun.sources, vars(typed)),
                     _taken("from torchrun's environment", pet.sources, vars(typed)), built.from_slurm,
                     built.from_platform):
            if line:
                print(line)
    from pai_launch.cli.startup import launch_run

    return launch_run(built.spec, host.env, built.visible, invocation.inbox,
                      [*invocation.torchrun.notes, *pet.notes, *built.notes])


#: typer reads the options from the command's signature: the declarations' own, after typer's context.
launch.__signature__ = inspect.Signature(
    [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
     *declared.parameters()], return_annotation=int)
app.command(epilog=EPILOG)(launch)


def _used_from_environment(ctx: typer.Context, pet: torchrun_flags.Read) -> torchrun_flags.Read:
    """What of torchrun's variables the command used: an option the command line or PAI_LAUNCH_* gave is not theirs,
    nor the note on how it was read."""
    used = [param for param in pet.sources if ctx.get_parameter_source(param) == ParameterSource.DEFAULT_MAP]
    dropped = {"--" + param.replace("_", "-") for param in pet.sources if param not in used}
    notes = [(event, fields) for event, fields in pet.notes
             if fields.get("as_option", " ").split(" ")[0] not in dropped]
    return torchrun_flags.Read({p: pet.options[p] for p in used}, {p: pet.sources[p] for p in used}, notes)


def _taken(title: str, sources: dict[str, str], values: dict[str, object]) -> str | None:
    """--dry-run's line naming the options that torchrun's flags or variables became: `--grace 5
    (--shutdown-timeout)`."""
    if not sources:
        return None
    return f"{title}: " + "; ".join(f"--{param.replace('_', '-')} {values[param]} ({source})"
                                    for param, source in sources.items())


def _error(message: str) -> None:
    _say(f"pai-launch: error: {message}\n")


def _say(text: str) -> None:
    """To stderr, if it can take it: a console that is gone must not change the exit code."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - nothing else to tell it with
        pass


@dataclass(frozen=True)
class Invocation:
    """What reaches the command as typer's context object: the signal handlers' queue (where they put what they
    catch), and the torchrun options read from the command line and from the environment."""

    inbox: queue.SimpleQueue
    torchrun: torchrun_flags.Read = field(default_factory=torchrun_flags.Read)
    #: torchrun's variables (PET_*), read as options below the command line and PAI_LAUNCH_*.
    pet: torchrun_flags.Read = field(default_factory=torchrun_flags.Read)


def own_options(command) -> torchrun_flags.OwnOptions:
    """The launch command's option spellings -> parameter, those taking a value apart from the flags."""
    valued, flags = {}, {}
    for param in command.params:
        for name in (*param.opts, *getattr(param, "secondary_opts", ())):
            if name.startswith("-"):
                (flags if getattr(param, "is_flag", False) else valued)[name] = param.name
    return torchrun_flags.OwnOptions(valued, flags)


#: Invoked as torchrun, the defaults that are torchrun's rather than pai-launch's: one worker per node.
TORCHRUN_DEFAULTS = {"nproc": "1"}


def run_command_line(argv: list[str], inbox: queue.SimpleQueue, *, as_torchrun: bool = False) -> int:
    """Run the typer app without click's own exit handling, so usage errors are one line and exit 2. torchrun's
    options that pai-launch does not declare are read first (cli.torchrun_flags); `as_torchrun` (the command's name is
    torchrun) gives torchrun's own defaults, below the command line and the environment."""
    command = typer.main.get_command(app)
    completion.register_shells()  # a shell asking for completions (_PAI_LAUNCH_COMPLETE) is answered in command.main
    try:
        rewritten = torchrun_flags.rewrite(argv, own_options(command), os.environ)
        pet = torchrun_flags.from_env(os.environ)
        defaults = {**(TORCHRUN_DEFAULTS if as_torchrun else {}), **pet.options}
        result = command.main(args=rewritten.argv, prog_name="torchrun" if as_torchrun else "pai-launch",
                              standalone_mode=False, obj=Invocation(inbox, rewritten.read, pet), default_map=defaults)
    except LaunchError as exc:
        _error(str(exc))
        return exc.exit_code
    except UsageError as exc:
        _error(f"{exc.format_message()} (see pai-launch --help)")
        return exitcodes.USAGE
    except typer.Abort:
        return exitcodes.for_signal(2)
    except Exception as exc:  # the outer boundary: a bug outside a run's own loop
        return _internal_error(exc)
    return result if isinstance(result, int) else 0


def _internal_error(exc: Exception) -> int:
    """The traceback for the report, one line saying what it means, and nothing of ours left running; exit 70 even when
    none of it can be written."""
    _say(traceback.format_exc())
    try:
        left = procs.Descendants().kill_all()
    except Exception:  # noqa: BLE001 - the exit code must still say what happened
        left = 0
    _error(f"internal error ({type(exc).__name__}: {exc}): a bug in pai-launch, exit code {exitcodes.INTERNAL_ERROR}"
           + (f"; {left} process(es) it had started were killed" if left else "") + "; please report it with the "
           "traceback above")
    return exitcodes.INTERNAL_ERROR
