"""The exit codes pai-launch documents, in one place (README and --help quote them)."""

import signal

#: The signals pai-launch handles (supervise.signals installs the handlers; --requeue-on picks among them).
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

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

TABLE = (
    (COMPLETE, "training complete (or already complete)"),
    (LAUNCHER_ERROR, "pai-launch's own agent died the same way twice before training"),
    (USAGE, "usage or preflight error, or a save folder this command cannot use; nothing was started (only the init "
            "run, when it showed that the script saves elsewhere than --save-name)"),
    (INIT_FAILED, "the init run (--perforate_model_parallel) failed"),
    (BUDGET_EXHAUSTED, "gave up: --max-failures consecutive failed generations without progress"),
    (NO_PROGRESS, "a generation exited 0 without a new switch file or the completion marker"),
    (SAVE_FOLDER, "the save folder was removed, became unwritable, or its disk (or --log-dir's) is full"),
    (INTERNAL_ERROR, "internal error in pai-launch: every process of the run was stopped; the traceback is in the log"),
    ("128+N", "stopped by signal N (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP, 131 for SIGQUIT)"),
    ("other", "the failing worker's own exit code (128+N if it was killed by signal N)"),
)


def for_signal(signum: int) -> int:
    """Shell convention: a run stopped by signal N exits 128+N."""
    return 128 + int(signum)


def from_returncode(returncode: int) -> int:
    """Map a Popen-style return code (negative for a signal) to a shell exit code."""
    return for_signal(-returncode) if returncode < 0 else returncode


def describe_returncode(returncode: int) -> str:
    """'exit code 3' or 'signal SIGKILL' for a Popen-style return code."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"
