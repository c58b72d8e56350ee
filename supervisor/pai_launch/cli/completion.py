"""`--print-completion SHELL`: the shell completion script of pai-launch's own command line.

torchrun's option prints torch's script (written by shtab from torchrun's parser); here typer writes it, and the same
machinery answers the shell at run time (the command reads its `_<PROG>_COMPLETE` variable before parsing anything),
so it completes the options pai-launch takes under the name it was run as (pai-launch, or torchrun). typer writes
no tcsh script: that shell is refused in one line.
"""

from __future__ import annotations

import typer

#: The shells typer writes a script for (torchrun's choices are bash, zsh and tcsh).
SHELLS = ("bash", "zsh", "fish")


def problem(shell: str) -> str | None:
    """Why no script can be printed for `shell`, None when one can."""
    if shell in SHELLS:
        return None
    return (f"{shell!r} is not supported: pai-launch writes its completion (typer's) for {', '.join(SHELLS[:-1])} "
            f"and {SHELLS[-1]} only; give one of them")


def complete_var(prog_name: str) -> str:
    """The variable the shell sets to ask the command for completions, as typer and click name it."""
    return f"_{prog_name}_COMPLETE".replace("-", "_").upper()


def register_shells() -> None:
    """Let the command answer the shell: typer registers its shells' completion classes only for an app that adds
    its own completion options, which the launch command does not (--print-completion is its one)."""
    from typer.completion import completion_init

    completion_init()


def script(prog_name: str, shell: str) -> str:
    """The completion script for `prog_name` in `shell` (one of SHELLS)."""
    from typer.completion import get_completion_script

    return get_completion_script(prog_name=prog_name, complete_var=complete_var(prog_name), shell=shell)


def print_script(ctx: typer.Context, value: str | None) -> None:
    """The option's callback: print the script and exit 0, or refuse the shell (a usage error, exit 2)."""
    if value is None or ctx.resilient_parsing:
        return
    shell = value.strip().lower()
    why = problem(shell)
    if why is not None:
        raise typer.BadParameter(why)
    print(script(ctx.find_root().info_name or "pai-launch", shell))
    raise typer.Exit(0)
