"""Runs in a warm worker, a fork of the agent's forkserver: the user's script, as `python -u SCRIPT ARGS` (or
`python -u -m MODULE ARGS`) would run it.

A fork starts where the server stood, so first everything a fresh interpreter would give the script is put back:
its own session, death with the server, the environment (the run's, plus what torch set for this rank), the working
directory, argv, sys.path, unbuffered stdio, default signal handlers and the signal mask (a stop signal that
arrived since the fork, held by the server's mask, is delivered then). The script then runs as `__main__`, and its
end becomes the exit a fresh interpreter would make: non-daemon threads joined, atexit handlers run, `sys.exit` codes
kept (a message means 1), an uncaught exception printed with exit 1, KeyboardInterrupt as death by SIGINT.

A successful worker returns to torch (which counts a forked worker as done only when its function returns) and skips
the interpreter's module teardown. Each worker also records its rank and its exit code in RECORDS/<pid>.json for
the agent's watch, which ends the generation as soon as every worker is gone, even one that left by os._exit.
Only the standard library is imported here: the server has already loaded whatever was preloaded.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import runpy
import signal
import sys
import threading

_REAL_EXIT = os._exit
#: What a fresh interpreter leaves at the default action (Python itself ignores SIGPIPE and SIGXFSZ).
_DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM,
                    signal.SIGCHLD)


def run_script(spec: dict) -> None:
    """The entry function torch calls in each forked worker; `spec` comes from warmpool.worker_spec."""
    server = sys.modules.get("pai_launch.forkserver.server_hooks")
    if server is not None:
        os.waitpid = server.REAL_WAITPID  # the server's recording wrapper (server_hooks.record_exits) is not the
        # script's
    _detach(spec["server_pid"])
    _restore_environment(spec["env"], spec["server_env"])
    os.chdir(spec["cwd"])
    sys.argv = list(spec["argv"])
    sys.path[:] = spec["sys_path"]
    if spec["unbuffered"]:
        _unbuffered_stdio()
    for signum in _DEFAULT_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _match_thread_settings()
    record = Record(spec["records"])
    record.started()
    os._exit = record.exiting  # the script's os._exit still leaves at once, but says so first
    code = _release_held_signals(server)
    if code is None:
        code = _run_module(spec["module"]) if spec.get("module") else _run(os.path.abspath(spec["argv"][0]))
    _join_threads()
    _run_atexit_handlers()
    _flush()
    record.exited(code)
    if code == 0:
        return
    if code < 0:  # KeyboardInterrupt: die by the signal, as a fresh interpreter does
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    _REAL_EXIT(code)


def _release_held_signals(server) -> int | None:
    """Put back the blocked signals a fresh interpreter has (the server held the stop signals: server_hooks).

    A signal sent to this worker since the fork was held, not lost, and is delivered now, with the defaults back:
    SIGTERM and the like end the process here, as they would end a fresh interpreter that had not reached the script;
    a SIGINT is a KeyboardInterrupt, returned as -SIGINT (the script is then not run). None: the script may run."""
    if server is None or server.MASK_BEFORE is None:
        return None
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, server.MASK_BEFORE)
    except KeyboardInterrupt:
        return -signal.SIGINT
    return None


def exit_code(value: object) -> int:
    """What `sys.exit(value)` makes a fresh interpreter exit with (printing a non-integer value first)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    try:
        print(value, file=sys.stderr)
    except Exception:  # noqa: BLE001 - an unprintable value still exits 1
        pass
    return 1


class Record:
    """RECORDS/<pid>.json: this worker's ranks from its start, its exit code at the end (written whole, by rename)."""

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, f"{os.getpid()}.json")
        self.data: dict = {}

    def started(self) -> None:
        env = os.environ
        self.data = {"rank": env.get("RANK"), "local_rank": env.get("LOCAL_RANK"), "group_rank": env.get("GROUP_RANK"),
                     "group_world_size": env.get("GROUP_WORLD_SIZE")}
        self._write()

    def exited(self, code: int) -> None:
        self.data["exit"] = code
        self._write()

    def exiting(self, code: int) -> None:
        """Stands in for os._exit in the worker."""
        try:
            _flush()
            self.exited(int(code) & 0xFF)
        finally:
            _REAL_EXIT(code)

    def _write(self) -> None:
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path + ".tmp", "w") as handle:
                json.dump(self.data, handle)
            os.replace(self.path + ".tmp", self.path)
        except OSError:
            pass  # the agent then waits for torch's own account of this worker


def _detach(server_pid: int) -> None:
    """Own session and process group (as torch gives a cold worker), and SIGKILL when the forkserver dies."""
    try:
        os.setsid()
    except OSError:
        pass
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != server_pid:  # the server died before the setting took
        _REAL_EXIT(128 + signal.SIGKILL)


def _restore_environment(run_env: dict[str, str], server_env: dict[str, str]) -> None:
    """The run's environment plus exactly what torch set for this rank (whatever differs from the server's)."""
    from_torch = {key: value for key, value in os.environ.items() if server_env.get(key) != value}
    os.environ.clear()
    os.environ.update(run_env)
    os.environ.update(from_torch)


def _match_thread_settings() -> None:
    """A preloaded torch set its thread count from the server's environment; a cold worker's comes from its own."""
    torch = sys.modules.get("torch")
    wanted = os.environ.get("OMP_NUM_THREADS", "")
    if torch is not None and wanted.isdigit() and int(wanted) > 0 and torch.get_num_threads() != int(wanted):
        torch.set_num_threads(int(wanted))


def _unbuffered_stdio() -> None:
    """What `python -u` gives: every write reaches the per-rank log file at once."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        try:
            old.flush()
        except (OSError, ValueError, AttributeError):
            pass
        encoding = getattr(old, "encoding", None) or "utf-8"
        errors = "backslashreplace" if name == "stderr" else (getattr(old, "errors", None) or "strict")
        setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=encoding, errors=errors,
                                            write_through=True))


def _run(script: str) -> int:
    return _ended(lambda: runpy.run_path(script, run_name="__main__"), script)


def _run_module(name: str) -> int:
    """`python -m NAME`: the module (a package's __main__) runs as __main__, with its file as argv[0]."""
    return _ended(lambda: runpy.run_module(name, run_name="__main__", alter_sys=True), _module_file(name))


def _module_file(name: str) -> str:
    """The file -m runs for `name`, whose frames start its traceback ("" when it cannot be found: runpy says why)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(name)
        if found is not None and found.submodule_search_locations is not None:
            found = importlib.util.find_spec(name + ".__main__")
    except (ImportError, ValueError):
        return ""
    return os.path.abspath(found.origin) if found is not None and found.origin else ""


def _ended(run, script: str) -> int:
    """Run the script; the exit code a fresh interpreter would leave with (negative: death by that signal)."""
    try:
        run()
        return 0
    except SystemExit as exc:
        return exit_code(exc.code)
    except KeyboardInterrupt:
        _print_exception(script)
        return -signal.SIGINT
    except BaseException:  # noqa: BLE001 - the script's own failure, reported as a fresh interpreter would
        _print_exception(script)
        return 1


def _print_exception(script: str) -> None:
    """The traceback from the script's first frame on (none of runpy's or ours), through sys.excepthook like an
    uncaught exception; an error before the script ran any line (a SyntaxError) has no traceback at all."""
    kind, value, tb = sys.exc_info()
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != script:
        tb = tb.tb_next
    if value is not None:
        value.__traceback__ = tb  # what the default hook prints
    try:
        sys.excepthook(kind, value, tb)
    except Exception:  # noqa: BLE001
        pass


def _join_threads() -> None:
    """A fresh interpreter waits for non-daemon threads before it exits."""
    me = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not me and not thread.daemon and thread.is_alive():
            thread.join()


def _run_atexit_handlers() -> None:
    """The script's (and its libraries') handlers, but not multiprocessing's own: the process's bootstrap still
    needs it to send torch this worker's return value."""
    try:
        import multiprocessing.util

        atexit.unregister(multiprocessing.util._exit_function)
    except (ImportError, AttributeError):
        pass
    atexit._run_exitfuncs()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
