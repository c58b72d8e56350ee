"""The agent's forkserver: warm workers for torch elastic's `forkserver` start method.

The agent starts one multiprocessing forkserver from its main thread (a parent-death signal follows the thread
that forked), preloaded once with torch and what else is asked for, then forks one probe child from it. The fork is
used only if that child shows CUDA untouched (neither initialised nor a "bad fork": a CUDA call in any worker would
fail) and the server runs no thread of its own. Otherwise the agent tries again without the optional part of the
preload and, failing that, runs every worker as a fresh interpreter, saying why.

perforatedai's import asks `torch.cuda.is_available()`, which on a CUDA build initialises the driver and poisons every
later fork. The server therefore runs with torch's NVML-based availability check (PYTORCH_NVML_BASED_CUDA_CHECK=1),
which counts devices without touching CUDA; the probe is the proof on each machine. Without the NVIDIA driver (a
CUDA build of torch on a CPU-only host) that check falls back to the CUDA runtime's count, which does touch CUDA; there
nothing can use CUDA anyway, so the server alone runs with no visible devices. Workers get the run's own
environment back (forkserver.worker_main), so the setting stays in the server.

The server's socket and multiprocessing's folder (pymp-*) live in the run's private temporary folder. Something that
cleans the temporary folder may still remove them: before each generation a server that cannot be reached any more is
replaced by a new one, checked again, rather than failing every generation after it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from dataclasses import dataclass, field

from pai_launch.forkserver import server_hooks
from pai_launch.wire.protocol import GenerationRequest

#: Proven safe to fork from: imported without touching CUDA.
SAFE_PRELOAD = ("torch", "torch.distributed")
#: The default: perforatedai too (its utils module imports the rest, with pandas and matplotlib: about a second per
#: worker), kept only where the probe passes; skipped where it is not installed.
DEFAULT_PRELOAD = (*SAFE_PRELOAD, "perforatedai.utils_perforatedai")
NVML_CHECK_ENV = "PYTORCH_NVML_BASED_CUDA_CHECK"
VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"
#: The NVIDIA driver's libraries: where neither loads, no process on this machine can use CUDA.
DRIVER_LIBRARIES = ("libnvidia-ml.so.1", "libcuda.so.1")
PROBE_TIMEOUT = 120.0


@dataclass
class WarmPool:
    """A checked forkserver and what a worker spec needs from it."""

    preload: tuple[str, ...]
    #: sys.path of a fresh `python -c` in the run's environment, less its leading '' (the script's folder goes there).
    cold_path: tuple[str, ...]
    #: Keys the agent added to its own environment for the server (never shown to a worker).
    added_env: frozenset[str] = frozenset()
    server_pid: int = 0
    server_env: dict[str, str] = field(default_factory=dict)
    preloaded: tuple[str, ...] = ()
    #: Modules asked for but not importable (the server skips them).
    missing: tuple[str, ...] = ()
    #: Why ensure() last replaced the server ("" if it never did).
    restarted_why: str = ""

    @property
    def exits(self) -> str | None:
        """Where the server writes each reaped worker's exit status (server_hooks.record_exits)."""
        return os.environ.get(server_hooks.EXITS_ENV)

    def private_paths(self) -> tuple[str, ...]:
        """The files the server needs: multiprocessing's folder, the exit records' folder, the server's socket."""
        address = _socket_path()
        return (*self._folders(), *((address,) if address else ()))

    def _folders(self) -> tuple[str, ...]:
        from multiprocessing import process

        return tuple(path for path in (process.current_process()._config.get("tempdir"), self.exits) if path)

    def ensure(self) -> tuple[bool, str | None]:
        """Before each generation, in the main thread: a server that died, or whose socket or folder was removed, is
        replaced by a new one and checked again.

        (whether it was restarted, None or why the agent must go cold)."""
        from multiprocessing import forkserver

        gone = [path for path in self.private_paths() if not os.path.lexists(path)]
        unreachable = _socket_path() in gone  # the server may live on, but no worker can reach it
        _restore_folders(self._folders())
        if unreachable:
            _discard(forkserver._forkserver)
        _quietly(forkserver.ensure_running)
        if forkserver._forkserver._forkserver_pid == self.server_pid:
            return False, None
        self.restarted_why = f"{gone[0]} was removed" if unreachable else "the forkserver had died"
        return True, self._checked()

    def _start(self) -> str | None:
        from multiprocessing import forkserver

        forkserver.set_forkserver_preload([*self.preload, "pai_launch.forkserver.server_hooks"])
        _quietly(forkserver.ensure_running)
        return self._checked()

    def _checked(self) -> str | None:
        from multiprocessing import forkserver

        self.server_pid = forkserver._forkserver._forkserver_pid
        self.server_env = dict(os.environ)
        facts = _probe(list(self.preload))
        if facts is None:
            return "the forkserver's probe child did not report"
        self.preloaded = tuple(facts["preloaded"])
        self.missing = tuple(name for name in self.preload if name not in self.preloaded)
        if facts["cuda_initialized"] or facts["bad_fork"]:
            return "CUDA was initialised in the forkserver, so a forked worker could not use it"
        if facts["server_threads"] > 1:
            return f"the forkserver runs {facts['server_threads'] - 1} thread(s) after its preload, which a fork " \
                "would not copy"
        return None

    def stop(self) -> None:
        from multiprocessing import forkserver

        if self.server_pid:
            try:
                forkserver._forkserver._stop()
            except FileNotFoundError:  # its socket was removed under us; the server itself is stopped and reaped
                forkserver._forkserver._forkserver_address = None
            self.server_pid = 0

    def worker_spec(self, request: GenerationRequest, records: str) -> dict:
        """forkserver.worker_main.run_script's argument: the cold command `python [-u] SCRIPT ARGS` (or
        `python [-u] -m MODULE ARGS`) taken apart."""
        args = list(request.args)
        unbuffered = bool(args) and args[0] == "-u"
        argv = args[1:] if unbuffered else args
        module = argv[1] if argv[:1] == ["-m"] else None
        if module is not None:
            argv = ["-m", *argv[2:]]  # python's own argv while -m looks for the module; runpy then sets argv[0]
        path = list(self.cold_path)
        if not getattr(sys.flags, "safe_path", False):  # -P / PYTHONSAFEPATH exist from Python 3.11 on
            # What python puts first: the working directory for -m, else the script's folder.
            path.insert(0, os.getcwd() if module is not None else os.path.dirname(os.path.realpath(argv[0])))
        # Asked for while the agent's environment holds the generation's variables (agent.workerenv): exactly what
        # a cold worker inherits.
        env = {key: value for key, value in os.environ.items() if key not in self.added_env}
        return {"server_pid": self.server_pid, "server_env": self.server_env, "env": env, "cwd": os.getcwd(),
                "argv": argv, "module": module, "sys_path": path, "unbuffered": unbuffered, "records": records}


def nvidia_driver_present(libraries: tuple[str, ...] = DRIVER_LIBRARIES) -> bool:
    """Whether NVML or the CUDA driver library loads here (loading initialises neither)."""
    import ctypes

    for name in libraries:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def start(preload: tuple[str, ...], cold_path: tuple[str, ...]) -> tuple[WarmPool | None, str]:
    """A checked forkserver, or (None, why not). Call from the agent's main thread."""
    added = {server_hooks.PARENT_ENV, server_hooks.EXITS_ENV} | (set() if NVML_CHECK_ENV in os.environ
                                                                 else {NVML_CHECK_ENV})
    os.environ[server_hooks.PARENT_ENV] = str(os.getpid())
    os.environ[server_hooks.EXITS_ENV] = tempfile.mkdtemp(prefix="exits-")  # in the run's temp folder, removed with it
    os.environ.setdefault(NVML_CHECK_ENV, "1")
    if VISIBLE_DEVICES_ENV not in os.environ and not nvidia_driver_present():
        # No driver: torch's NVML check fails and falls back to cudaGetDeviceCount, which poisons every fork. No
        # process here can use CUDA, so the server alone sees no devices; workers get the run's environment back.
        added.add(VISIBLE_DEVICES_ENV)
        os.environ[VISIBLE_DEVICES_ENV] = ""
    attempts = [tuple(preload)]
    safe = tuple(name for name in preload if name in SAFE_PRELOAD)
    if safe and safe != tuple(preload):  # else nothing proven safe is left to fall back on: cold
        attempts.append(safe)
    why = ""
    for attempt in attempts:
        pool = WarmPool(attempt, tuple(cold_path), frozenset(added))
        problem = pool._start()
        if problem is None:
            if attempt != attempts[0]:
                pool.missing = tuple(sorted(set(preload) - set(attempt)))
            return pool, why
        pool.stop()
        why = f"{problem} (preload: {', '.join(attempt) or 'nothing'})"
    for key in added:
        os.environ.pop(key, None)
    return None, why


def _socket_path() -> str | None:
    """The server's socket as a file (None: no server, or a name in the abstract namespace, which nobody removes)."""
    from multiprocessing import forkserver, util

    address = forkserver._forkserver._forkserver_address
    return None if address is None or util.is_abstract_socket_namespace(address) else address


def _restore_folders(folders: tuple[str, ...]) -> None:
    """Make the folders (and the agent's temporary folder above them) again if they were removed: a new server's
    socket, the probe's folder and the exit records go there."""
    for folder in (tempfile.gettempdir(), *folders):
        os.makedirs(folder, mode=0o700, exist_ok=True)


def _discard(server) -> None:
    """Let go of a server nobody can reach any more (its socket is gone): killed, reaped, forgotten, so that
    ensure_running starts a new one."""
    with server._lock:
        pid = server._forkserver_pid
        if pid is None:
            return
        os.close(server._forkserver_alive_fd)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        server._forkserver_pid = server._forkserver_alive_fd = server._forkserver_address = None


def _quietly(start) -> None:
    """Start the server with /dev/null as its stdout: what the preloaded modules print on import is nobody's output
    (a cold worker prints it to its own log; torch gives every warm worker its log files)."""
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):  # a console that is gone: what was pending is dropped
            pass
        os.dup2(null, 1)
        start()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def _probe(preload: list[str]) -> dict | None:
    import multiprocessing

    with tempfile.TemporaryDirectory(prefix="pai-launch-probe-") as folder:
        path = os.path.join(folder, "facts.json")
        child = multiprocessing.get_context("forkserver").Process(target=server_hooks.probe, args=(path, preload),
                                                                 name="pai-launch-probe")
        child.start()
        child.join(PROBE_TIMEOUT)
        if child.is_alive():
            child.kill()
            child.join()
        try:
            with open(path) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

