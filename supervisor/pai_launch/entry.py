"""The `pai-launch` console script: its console made safe and its signal handlers installed first, then everything
slow.

A launch's stdout and stderr become streams whose failed writes are dropped (console.py): a closed terminal, a broken
pipe or a full disk never ends a run.

`pai-launch doctor ...`, `pai-launch status ...` and `pai-launch env ...` are tools, not runs: they get no launch
signal handlers (Ctrl-C stops them the usual way). Any other first argument is the launch command line, so a script
named `status` is run as `pai-launch ./status`.

Installed or linked under the name `torchrun` (or run as `python -m pai_launch.torchrun`), it takes a torchrun command
line as torchrun would: no tools (`torchrun status.py` runs the script), and torchrun's default of one worker.
"""

from __future__ import annotations

import os
import queue
import sys

from pai_launch.core import exitcodes

#: First arguments that name a tool rather than a script.
from pai_launch.supervise.children import signals
from pai_launch.supervise.outputs import console

#: First arguments that name a tool rather than a script.
TOOLS = ("doctor", "status", "env")


#: The name under which the command line is torchrun's.
TORCHRUN = "torchrun"


def main(argv: list[str] | None = None, *, as_torchrun: bool | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if as_torchrun is None:
        as_torchrun = invoked_as_torchrun(sys.argv[0])
    _require_working_directory()
    if args and args[0] in TOOLS and not as_torchrun:
        from pai_launch.cli import tools as tools_cli

        sys.exit(tools_cli.run_tool(args))
    console.install()  # before anything is opened or started: closed fds 0-2 get /dev/null, children inherit it
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    signals.install(inbox)  # before importing typer and friends: a SIGTERM now is queued, not lost
    from pai_launch.cli import launch as cli

    sys.exit(cli.run_command_line(args, inbox, as_torchrun=as_torchrun))


def invoked_as_torchrun(argv0: str) -> bool:
    """Whether the command's own name is torchrun (a link or a copy of the console script under that name)."""
    return os.path.basename(argv0) == TORCHRUN


def _require_working_directory() -> None:
    """A working directory removed before the start is a usage error, found before anything asks for the path."""
    try:
        os.getcwd()
    except FileNotFoundError:
        print("pai-launch: error: the working directory no longer exists (it was removed): cd into an existing "
              "folder (the one holding the script) and start again", file=sys.stderr)
        sys.exit(exitcodes.USAGE)
