"""The exit codes pai-launch documents, with what each means (docs/users/exit-codes.md and --help quote TABLE); the
codes themselves
are defined with the error class that carries one (wire.errors), which every process may import."""

import signal

from pai_launch.wire.errors import (  # noqa: F401 - re-exported: the supervisor names them through here
    BUDGET_EXHAUSTED,
    COMPLETE,
    INIT_FAILED,
    INTERNAL_ERROR,
    LAUNCHER_ERROR,
    NO_PROGRESS,
    SAVE_FOLDER,
    USAGE,
)

#: The signals pai-launch handles (supervise.children.signals installs the handlers; --requeue-on picks among them).
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

TABLE = (
    (COMPLETE, "training complete (or already complete), or stopped at --max-dendrites / --max-generations"),
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

#: What no new start can fix, on one machine or many: the init run failed, --max-failures was spent, a generation made
#: no progress, the save folder is unusable. A platform's restart policy ends the job on these at once (the Kubernetes
#: examples' podFailurePolicy). 1 and 2 are not among them: on a node of a multi-node job they also mean node 0 was lost
#: or not reachable yet, which a new start fixes; nor is a worker's own code, which may be 1 as well. Those are left to
#: a platform's bounded count of restarts.
RESTART_CANNOT_HELP = (INIT_FAILED, BUDGET_EXHAUSTED, NO_PROGRESS, SAVE_FOLDER)
#: A stop from outside the job (the platform's SIGTERM on eviction, preemption or scale-down; a lost session's SIGHUP):
#: nothing failed, and a new start resumes from the save folder, so a platform may restart on these without counting a
#: failure (SkyPilot's recover_on_exit_codes). SIGINT and SIGQUIT are a person's stop, and stay stops.
RESTART_RESUMES = (128 + signal.SIGHUP, 128 + signal.SIGTERM)


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
