"""The agent process: one per node for the whole run, the only part of pai-launch that imports torch.

It starts, imports torch's elastic launcher, starts its forkserver (warm workers; see warmpool) unless told to run
cold, and says it is ready. Then, one at a time, it takes a GenerationRequest from its request pipe, runs that
generation (agent/generation.py), writes the GenerationResult and says it is ready again. It never runs user code
itself. It leaves when the supervisor closes the request pipe, and dies with the supervisor.

Messages out (wire.protocol.REPORTS, one per line): AgentReady (each time it can take a generation; the first
says whether workers are warm, and why not), Joined (multi-node), the GenerationResult, StopRaised,
ForkserverRestarted, WentCold (its forkserver died and its successor failed the self-check), Retiring, Pong.
Messages in (REQUESTS): a GenerationRequest, or at any time StopJob (raise the job's stop flag in node 0's store),
Ping (the supervisor's heartbeat, answered at once from the request reader, which runs from before torch's import
on, so a stopped or deadlocked agent is told from a busy one), Cancel (the run is stopping: that generation starts
no worker if it has not yet).

Run as: python -m pai_launch.agent.main --request-fd R --result-fd W --parent-pid P [--cold | --preload M1,M2]
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

import psutil

from pai_launch.agent import generation as agent_generation
from pai_launch.agent.control import AgentControl
from pai_launch.agent.workers import helper_pids
from pai_launch.linux import privatedir, procs
from pai_launch.store import client
from pai_launch.wire import codec
from pai_launch.wire.protocol import (
    REQUESTS,
    AgentReady,
    Cancel,
    ForkserverRestarted,
    GenerationRequest,
    GenerationResult,
    Joined,
    Ping,
    Pong,
    Retiring,
    StopJob,
    StopRaised,
    WentCold,
)

#: Delivered by the kernel when pai-launch dies (even by SIGKILL): take every worker down with us.
PARENT_DIED_SIGNAL = signal.SIGRTMIN + 3

#: Seconds, in pai-launch's own tests: the agent, its parent gone, waits this long between killing its workers and
#: exiting (as a loaded machine leaves its other threads time to run meanwhile), a fault hook rather than a slow one.
DIES_SLOWLY_TEST_ENV = "PAI_LAUNCH_TEST_AGENT_DIES_SLOWLY"


def _on_parent_death(control: AgentControl, linger: float) -> None:  # pragma: no cover - the kill -9 tests run it
    # Every thread inherits the parent-death setting, so the kernel sends this signal once per thread: a nested
    # call would interrupt the sweep below after the workers died and before their orphans were killed.
    if control.parent_gone:
        return
    control.parent_gone = True  # before the kill: the workers' deaths by our hand are no outcome to publish
    for proc in psutil.Process().children(recursive=True):
        try:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.kill()
        except (psutil.Error, OSError):
            pass
    if linger > 0:
        time.sleep(linger)
    os._exit(128 + signal.SIGKILL)


def _ignore(signum, frame) -> None:
    """SIGUSR1/2 are meant for the workers; a handler (not SIG_IGN, which exec would pass on) keeps us alive."""


def _arm_parent_watch(parent_pid: int, control: AgentControl) -> None:
    linger = float(os.environ.get(DIES_SLOWLY_TEST_ENV) or 0)
    signal.signal(PARENT_DIED_SIGNAL, lambda signum, frame: _on_parent_death(control, linger))
    procs.set_parent_death_signal(PARENT_DIED_SIGNAL)
    if os.getppid() != parent_pid:
        _on_parent_death(control, linger)


class Output:
    """The result pipe: whole lines, from any thread. A launcher error names the run's private file that is gone, if
    one is (`private_paths`): then it is a fault a retry can fix (outcomes)."""

    def __init__(self, fd: int, private_paths: Callable[[], Iterable[str]] = tuple) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._private_paths = private_paths
        #: What the agent last said of itself (AgentReady), repeated with each ready.
        self.facts = AgentReady(warm=False)

    def _send(self, message) -> None:
        with self._lock:
            try:
                os.write(self._fd, codec.encode(message))
            except OSError:
                pass

    def ready(self, facts: AgentReady | None = None) -> None:
        """Ready for a generation; the first time with the agent's account of itself (torch is imported by now),
        later with the same facts as they stand."""
        if facts is not None:
            torch = sys.modules.get("torch")
            self.facts = replace(facts, torch=facts.torch or getattr(torch, "__version__", None),
                                 python=facts.python or ".".join(map(str, sys.version_info[:3])))
        self._send(self.facts)

    def joined(self, generation_: int, failures: int) -> None:
        self._send(Joined(generation_, failures))

    def result(self, result: GenerationResult) -> None:
        if result.error:
            result = replace(result, error=privatedir.with_lost_note(result.error, self._private_paths()))
        _flush_stdio()
        self._send(result)

    def pong(self, seq: int) -> None:
        self._send(Pong(seq))

    def stop_raised(self) -> None:
        self._send(StopRaised())

    def forkserver_restarted(self, pid: int, why: str = "") -> None:
        self.facts = replace(self.facts, forkserver=pid)
        self._send(ForkserverRestarted(pid, why))

    def went_cold(self, why: str) -> None:
        self.facts = AgentReady(warm=False, why=why, torch=self.facts.torch, python=self.facts.python)
        self._send(WentCold(why))

    def retiring(self, why: str) -> None:
        self._send(Retiring(why))


def _flush_stdio() -> None:
    """The workers' last relayed lines out; a console that is gone (closed, a broken pipe, a full disk) is no fault of
    the generation's."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def send_stop(stop: StopJob, control: AgentControl) -> None:
    control.stop_received(stop.signum, stop.reason)
    try:
        client.raise_stop_flag(stop)
    except Exception:  # noqa: BLE001 - the store may be gone already: nothing left to tell
        pass


def _read_requests(fd: int, requests: queue.Queue, out: Output, control: AgentControl) -> None:
    """Generation requests go to the main loop; the heartbeat, a cancel and a stop are handled here at once, even
    mid-generation. EOF: None. A line that is no request goes to the main loop as the WireError it is: the agent
    exits naming it (its supervisor reports that)."""
    try:
        for line in codec.read_lines(fd):
            message = REQUESTS.decode(line)
            if isinstance(message, Ping):
                out.pong(message.seq)
            elif isinstance(message, Cancel):
                control.cancel(message.generation)
            elif isinstance(message, StopJob):
                send_stop(message, control)
                out.stop_raised()
            else:
                requests.put(message)
    except codec.WireError as exc:
        requests.put(exc)
        return
    requests.put(None)


def _warm_up(options, out: Output):
    """The forkserver, or cold workers (--cold, or a self-check that failed); tells the supervisor which."""
    started = time.monotonic()
    if options.cold:
        out.ready(AgentReady(warm=False, why="--cold"))
        return None
    from pai_launch.agent import warmpool

    preload = tuple(name for name in options.preload.split(",") if name) if options.preload is not None \
        else warmpool.DEFAULT_PRELOAD
    try:
        pool, why = warmpool.start(preload, tuple(options.cold_path))
    except Exception as exc:  # noqa: BLE001 - a forkserver that cannot start means cold workers, not no run
        pool, why = None, f"the forkserver did not start: {type(exc).__name__}: {exc}"
    took = round(time.monotonic() - started, 2)
    if pool is None:
        _stop_resource_tracker()  # started for the forkserver; a cold agent's only children are its workers
        out.ready(AgentReady(warm=False, why=why, took_s=took, helpers=tuple(helper_pids())))
    else:
        out.ready(AgentReady(warm=True, why=why, preloaded=tuple(pool.preloaded), missing=tuple(pool.missing),
                             forkserver=pool.server_pid, took_s=took, helpers=tuple(helper_pids())))
    return pool


def _checked_pool(pool, out: Output):
    """Before a generation: the forkserver as it is, restarted if it died, or None (cold workers from now on) when
    its successor fails the self-check; the supervisor hears which."""
    if pool is None:
        return None
    restarted, problem = pool.ensure()
    if problem is None:
        if restarted:
            out.forkserver_restarted(pool.server_pid, pool.restarted_why)
        return pool
    pool.stop()
    for key in pool.added_env:  # cold workers inherit the agent's environment: none of the server's
        os.environ.pop(key, None)
    _stop_resource_tracker()
    out.went_cold(f"the forkserver had to be restarted and failed its self-check: {problem}")
    return None


def _stop_resource_tracker() -> None:
    try:
        from multiprocessing import resource_tracker

        resource_tracker._resource_tracker._stop()
    except Exception:  # noqa: BLE001 - it dies with us anyway (its pipe closes)
        pass


def main(argv: list[str] | None = None, cold_path: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pai_launch.agent.main")
    parser.add_argument("--request-fd", type=int, required=True)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--preload", default=None, help="comma-separated modules for the forkserver")
    parser.add_argument("--temp-dir", default=None,
                        help="where multiprocessing keeps its files (removed by the supervisor)")
    options = parser.parse_args(argv)
    if options.temp_dir:
        import tempfile

        os.makedirs(options.temp_dir, exist_ok=True)
        tempfile.tempdir = options.temp_dir  # this process only: neither the forkserver nor a worker sees it
    options.cold_path = cold_path if cold_path is not None else [p for p in sys.path if p]
    control = AgentControl()
    _arm_parent_watch(options.parent_pid, control)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        os.environ.pop(name, None)  # torch gives each worker its own; a worker is a child that has RANK
    for signum in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, _ignore)
    signal.signal(agent_generation.ABANDON_SIGNAL, control.on_abandon)
    # torch's C++ warnings (a peer's store connection closing, with a stack trace) are noise in the agent; the
    # workers, which inherit our environment, keep whatever level the user set.
    user_level = os.environ.get("TORCH_CPP_LOG_LEVEL")
    os.environ["TORCH_CPP_LOG_LEVEL"] = user_level or "ERROR"
    pool = None
    out = Output(options.result_fd, lambda: (options.temp_dir, *(pool.private_paths() if pool is not None else ())))
    requests: queue.Queue = queue.Queue()
    # Before torch's import (seconds): the heartbeat is answered, and a cancel heard, while it runs.
    threading.Thread(target=_read_requests, args=(options.request_fd, requests, out, control), name="requests",
                     daemon=True).start()
    import torch.distributed.launcher.api  # noqa: F401  - warm up before the first request arrives

    if user_level is None:
        os.environ.pop("TORCH_CPP_LOG_LEVEL")
    pool = _warm_up(options, out)
    while True:
        request: GenerationRequest | codec.WireError | None = requests.get()
        if request is None:
            break
        if isinstance(request, codec.WireError):
            if pool is not None:
                pool.stop()
            raise SystemExit(f"pai-launch agent: {request}")
        pool = _checked_pool(pool, out)
        agent_generation.run_generation(request, out, control, pool)
        out.ready()
    if pool is not None:
        pool.stop()  # the server exits and is reaped, so nothing is left for the supervisor's sweep
    _stop_resource_tracker()
    _flush_stdio()
    os._exit(0)


if __name__ == "__main__":
    main()
