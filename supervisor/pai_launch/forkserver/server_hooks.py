"""Imported last by the agent's forkserver, after the preloaded modules; and the self-check's probe.

On import, in the server: die with the agent (SIGKILL when the agent's main thread, which started the server, is
gone; the workers die with the server in turn), ignore and hold the stop signals and SIGUSR1/2 (meant for the
workers), record each worker's exit status as the server reaps it, then move everything preloaded into the garbage
collector's permanent generation, so that forked workers do not touch (and copy) those pages when they collect.

`probe` runs in one forked child before any worker: it reports whether that fork is usable.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading

#: Set by the agent in the server's environment: the pid the server must be a child of.
PARENT_ENV = "PAI_LAUNCH_FORKSERVER_PARENT"
#: Set by the agent: the folder where the server writes each reaped worker's exit status, EXITS/<pid>.
EXITS_ENV = "PAI_LAUNCH_FORKSERVER_EXITS"
#: os.waitpid as it was before the server wrapped it (each worker puts it back: worker_main).
REAL_WAITPID = os.waitpid
#: Threads running in the server once the preload is done (a fork copies none of them: a module that needs its
#: threads would be broken in every worker). Set on import in the server; inherited by each fork.
SERVER_THREADS = 0
#: Ignored and blocked in the server; each worker puts back MASK_BEFORE (worker_main), releasing what reached it.
HELD_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
#: The server's blocked signals before it held HELD_SIGNALS: what a fresh interpreter started by the agent has.
#: None in a process that held nothing (not an armed server, or a fork of one).
MASK_BEFORE: frozenset | None = None


def _arm() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit() and os.getppid() != int(parent):
        os._exit(128 + signal.SIGKILL)
    # Slurm (every process of a job step) and a control-group stop signal the server along with the workers. It must
    # not die of them: its warm workers die with it (SIGKILL, their parent-death signal), cut off in the middle of
    # their own stop whatever the grace. The agent ends the server (its pipe closes, or SIGKILL). Each worker puts
    # the defaults back (worker_main).
    # They are also held (blocked), not only ignored: a fork inherits the block, so a signal that reaches a worker
    # before it has put its handlers back stays pending, and is delivered as the worker lets it through, instead of
    # being lost (a worker told to stop as it started would then run until its SIGKILL).
    for signum in HELD_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    global MASK_BEFORE
    MASK_BEFORE = frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS))
    if os.environ.get(EXITS_ENV):
        record_exits(os.environ[EXITS_ENV])
    global SERVER_THREADS
    SERVER_THREADS = threading.active_count()
    gc.collect()
    gc.freeze()


def record_exits(folder: str) -> None:
    """Make this process's os.waitpid write each reaped child's Popen-style exit status to FOLDER/<pid>.

    The server reaps every worker (multiprocessing's forkserver loop calls os.waitpid), so it alone learns how a
    worker that was killed died; a killed worker writes no record of its own. The agent's worker watch reads it."""
    def waitpid(pid: int, options: int) -> tuple[int, int]:
        found = REAL_WAITPID(pid, options)
        if found[0] > 0:
            try:
                path = os.path.join(folder, str(found[0]))
                with open(path + ".tmp", "w") as handle:
                    handle.write(str(os.waitstatus_to_exitcode(found[1])))
                os.replace(path + ".tmp", path)
            except (OSError, ValueError):
                pass  # the agent then relies on torch for that worker's status
        return found

    os.waitpid = waitpid


def probe(path: str, preload: list[str]) -> None:
    """In a fork of the server: is CUDA untouched here, and was everything asked for preloaded? (JSON to `path`.)"""
    facts: dict = {"preloaded": [name for name in preload if name in sys.modules],
                   "server_threads": SERVER_THREADS, "cuda_initialized": False, "bad_fork": False}
    torch = sys.modules.get("torch")
    if torch is not None:
        cuda = torch.cuda
        facts["cuda_initialized"] = bool(cuda.is_initialized())
        facts["bad_fork"] = bool(cuda._is_in_bad_fork())
    with open(path, "w") as handle:
        json.dump(facts, handle)


if os.environ.get(PARENT_ENV):
    _arm()
