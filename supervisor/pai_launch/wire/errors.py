"""The exit codes pai-launch documents, and the one error class that carries one.

Every problem that ends pai-launch on purpose (a bad option, a save folder it cannot use, a job that cannot start
on this node) is a LaunchError: its message is the one line the user reads, naming the problem and the fix, and its
class says the exit code. Each boundary (the command line, the start of a run) catches LaunchError once and exits
with `exit_code`; anything else that escapes is a bug, exit 70. Stdlib only, so every process's code can raise
one; core.exitcodes re-exports the codes with their descriptions for the manual and --help.
"""

from __future__ import annotations

COMPLETE = 0
#: Bad command line or failed preflight: nothing was started.
USAGE = 2
#: The single-process init run (--perforate_model_parallel) failed.
INIT_FAILED = 3
#: The failure budget (--max-failures consecutive failed generations without progress) is spent.
BUDGET_EXHAUSTED = 4
#: A generation ended with every worker at 0 but wrote neither a switch file nor the completion marker.
NO_PROGRESS = 5
#: The save folder was removed, became unwritable, or its disk filled up; or the disk of the workers' output did.
SAVE_FOLDER = 6
#: The same failure before training repeated with the launcher itself at fault (its agent died).
LAUNCHER_ERROR = 1
#: A bug in pai-launch itself (sysexits' EX_SOFTWARE): logged with its traceback, every process stopped.
INTERNAL_ERROR = 70


class LaunchError(Exception):
    """A problem that ends pai-launch with a documented exit code; `str()` is the one line to show."""

    exit_code: int = USAGE
