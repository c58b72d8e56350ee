"""The processes pai-launch starts, each with a thread that reports its end to the loop's inbox.

- PlainProcess: the init run and the DataParallel process, output passed through to our stdout with
  its tail kept for error messages; reports ProcessExited.
- Agent: the `python -m pai_launch.agent.main` process that runs the run's generations, one per request; reports
  AgentStarted, AgentJoined, AgentReported, AgentGone and AgentAnswered (its heartbeat).
All of them: own session, stdin from /dev/null, SIGKILLed by the kernel if pai-launch dies. Making one starts
nothing: `start()` does (so what decides to start one can be tested without a process).
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psutil

from pai_launch.supervise import liveline
from pai_launch.linux import procs
from pai_launch.core.events import (
    AgentAnswered, AgentGone, AgentJoined, AgentReported, AgentStarted, AgentTookRequest, ProcessExited, Role,
)
from pai_launch.supervise.plan import Command
from pai_launch.wire import codec
from pai_launch.wire.protocol import (
    REPORTS, AgentReady, Cancel, ForkserverRestarted, GenerationRequest, GenerationResult, Joined, Ping, Pong, Retiring,
    StopJob, StopRaised, WentCold,
)
from pai_launch.supervise.threads import start_guarded

#: Where a child's end is reported: the loop's inbox (its `put`).
Report = Callable[[object], None]

TAIL_LINES = 20


class PlainProcess:
    """One process whose output we relay line by line and whose last lines we keep."""

    def __init__(self, role: Role, command: Command, base_env: dict[str, str], report: Report, *,
                 live: liveline.LiveLine | None = None) -> None:
        self.role, self.command, self._report, self._live = role, command, report, live
        self._env = {name: value for name, value in {**base_env, **command.env}.items() if name not in command.unset}
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.popen: subprocess.Popen | None = None
        self.pid: int | None = None

    def start(self) -> PlainProcess:
        self.popen = subprocess.Popen(
            procs.dies_with_parent(self.command.argv),
            cwd=self.command.cwd,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.popen.pid
        start_guarded(self._pump, name=f"pump-{self.pid}", report=self._report)
        return self

    def _pump(self) -> None:
        write = _writer("stdout", self._live)
        assert self.popen.stdout is not None
        for line in iter(self.popen.stdout.readline, b""):
            self._tail.append(line.decode(errors="replace").rstrip("\n"))
            write(line)
        returncode = self.popen.wait()
        self._report(ProcessExited(self.role, returncode, "\n".join(self._tail), time.monotonic()))


class Agent:
    """The node's agent process, started once and handed one generation at a time.

    A request is written only once the agent has said it is ready (it may still be starting its forkserver, or
    finishing torch's teardown of the last generation); until then it waits here. An agent that exits between
    generations hands back the request it never took (AgentGone), for a new agent to run."""

    def __init__(self, python: str, cwd: Path, base_env: dict[str, str], report: Report, *,
                 agent_args: tuple[str, ...] = (), live: liveline.LiveLine | None = None) -> None:
        self._python, self._cwd, self._env, self._agent_args, self._live = python, cwd, base_env, agent_args, live
        self._report = report
        self.popen: subprocess.Popen | None = None
        self.pid: int | None = None
        self._request_w = self._result_r = -1
        self._lock = threading.Lock()
        self._ready = False
        self._pending: GenerationRequest | None = None
        self._running: GenerationRequest | None = None
        #: The agent's own account of itself, from its first ready (warm, why, preloaded, forkserver pid).
        self.facts: AgentReady | None = None
        self.stop_raised = threading.Event()
        self._retiring = ""
        #: The heartbeat: one ping at a time is out (so a stopped agent's pipe never fills), sent at `_pinged_at`.
        self._ping_seq = 0
        self._ping_out = False
        self._pinged_at = float("-inf")

    def start(self) -> Agent:
        request_r, self._request_w = os.pipe()
        self._result_r, result_w = os.pipe()
        # Import this very copy of the package without putting it on the workers' PYTHONPATH; keep the sys.path a
        # fresh interpreter would have (less -c's leading ''), which warm workers are given.
        bootstrap = (f"import sys; cold = sys.path[1:] if sys.path[:1] == [''] else sys.path[:]; "
                     f"sys.path.insert(0, {_package_root()!r}); from pai_launch.agent.main import main; "
                     f"main(cold_path=cold)")
        argv = [
            self._python, "-c", bootstrap, "--request-fd", str(request_r), "--result-fd", str(result_w),
            "--parent-pid", str(os.getpid()), *self._agent_args,
        ]
        # The agent relays its workers' lines to its stdout/stderr: ours, unless a live status line needs them to
        # pass through us.
        piped = self._live is not None
        try:
            self.popen = subprocess.Popen(
                argv, cwd=self._cwd, env=self._env, stdin=subprocess.DEVNULL, start_new_session=True,
                pass_fds=(request_r, result_w), stdout=subprocess.PIPE if piped else None,
                stderr=subprocess.PIPE if piped else None,
            )
        finally:
            os.close(request_r)
            os.close(result_w)
        if piped:
            for stream, pipe in (("stdout", self.popen.stdout), ("stderr", self.popen.stderr)):
                threading.Thread(target=_relay, args=(pipe, _writer(stream, self._live)), name=f"agent-{stream}",
                                 daemon=True).start()
        self.pid = self.popen.pid
        start_guarded(self._read, name=f"agent-{self.pid}", report=self._report)
        return self

    def workers(self) -> list[psutil.Process]:
        """The processes running the current generation's script: none before the request went out; the forkserver's
        children when warm; else the agent's children but its helpers."""
        with self._lock:
            running, facts = self._running, self.facts
        if running is None:
            return []
        try:
            if facts is not None and facts.warm and facts.forkserver:
                return psutil.Process(facts.forkserver).children()
            helpers = set(facts.helpers if facts is not None else ())
            return [child for child in psutil.Process(self.pid).children() if child.pid not in helpers]
        except psutil.Error:
            return []

    def run(self, request: GenerationRequest) -> None:
        """Hand the agent its generation now, or as soon as it is ready; AgentReported follows from a thread."""
        with self._lock:
            if self._ready:
                self._send(request)
            else:
                self._pending = request
                self._report(AgentTookRequest(self.pid, False, time.monotonic()))  # before the reader can send it

    def _send(self, request: GenerationRequest) -> None:
        self._ready, self._pending, self._running = False, None, request
        try:
            os.write(self._request_w, codec.encode(request))
        except OSError:
            pass  # it died: its end of the result pipe says so

    def ping(self, now: float, every: float) -> None:
        """The heartbeat: a ping once the last was answered and `every` seconds have passed; AgentAnswered follows."""
        with self._lock:
            if self._ping_out or now - self._pinged_at < every or self._request_w < 0:
                return
            self._ping_seq += 1
            self._ping_out, self._pinged_at = True, now
            seq = self._ping_seq
        try:
            os.write(self._request_w, codec.encode(Ping(seq)))
        except OSError:
            pass  # it died: its end of the result pipe says so

    def withdraw(self) -> bool:
        """The run is stopping: a request still waiting here is dropped (its generation reported as cancelled, no
        worker started); one already sent is cancelled in the agent, which starts no worker for it if it has not yet.
        True if a waiting request was dropped."""
        with self._lock:
            pending, running = self._pending, self._running
            self._pending = None
            if pending is not None:
                self._running = None
        if pending is not None:
            self._report(AgentReported(self.pid, GenerationResult(pending.generation, log_dir=pending.log_dir,
                                                                  cancelled=True), None, time.monotonic()))
            return True
        if running is not None and self._request_w >= 0:
            try:
                os.write(self._request_w, codec.encode(Cancel(running.generation)))
            except OSError:
                pass
        return False

    def stop_job(self, stop: StopJob) -> None:
        """Have the agent raise the job's stop flag in node 0's store (running a generation or not)."""
        if self._request_w >= 0:
            try:
                os.write(self._request_w, codec.encode(stop))
            except OSError:
                self.stop_raised.set()

    def _read(self) -> None:
        """Reports until EOF (REPORTS; one it does not know is a WireError: this thread fails, an internal error)."""
        for line in codec.read_lines(self._result_r):
            self._report_of(REPORTS.decode(line))
        os.close(self._result_r)
        self._close_request()
        self.stop_raised.set()
        returncode = self.popen.wait()
        now = time.monotonic()
        with self._lock:
            running, pending = self._running, self._pending
            self._running = self._pending = None
        if running is not None or (pending is not None and self.facts is None):
            # It died running a generation, or before it was ever ready: that generation failed (a new agent
            # would most likely die the same way).
            self._report(AgentReported(self.pid, None, returncode, now))
        else:
            self._report(AgentGone(self.pid, returncode, self._retiring, pending, now))

    def _report_of(self, message) -> None:
        now = time.monotonic()
        if isinstance(message, AgentReady):
            with self._lock:
                self._ready = True
                first = self.facts is None
                if first:
                    self.facts = message
                took = self._pending is not None
                if took:
                    self._send(self._pending)
            if took:
                self._report(AgentTookRequest(self.pid, True, now))
            if first:
                self._report(AgentStarted(self.pid, message, now))
        elif isinstance(message, Joined):
            self._report(AgentJoined(self.pid, message.generation, message.failures, now))
        elif isinstance(message, Pong):
            with self._lock:
                self._ping_out = False
            self._report(AgentAnswered(self.pid, now))
        elif isinstance(message, StopRaised):
            self.stop_raised.set()
        elif isinstance(message, ForkserverRestarted):
            with self._lock:
                self.facts = replace(self.facts or AgentReady(warm=True), forkserver=message.pid)
                facts = self.facts
            self._report(AgentStarted(self.pid, facts, now, restarted_why=message.why or "the forkserver had died"))
        elif isinstance(message, WentCold):
            with self._lock:
                self.facts = AgentReady(warm=False, why=message.why)
                facts = self.facts
            self._report(AgentStarted(self.pid, facts, now, went_cold=True))
        elif isinstance(message, Retiring):
            self._retiring = message.why
        elif isinstance(message, GenerationResult):
            with self._lock:
                self._running = None
            self._report(AgentReported(self.pid, message, None, now))

    def _close_request(self) -> None:
        if self._request_w >= 0:
            os.close(self._request_w)
            self._request_w = -1

    def close(self) -> None:
        """No more generations: closing its request pipe makes it exit."""
        self._close_request()


def _writer(stream: str, live: liveline.LiveLine | None):
    """Where a child's lines for our `stream` go: through the live status line when there is one."""
    if live is not None:
        return lambda data: live.write_output(stream, data)
    target = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer

    def write(data: bytes) -> None:
        try:
            target.write(data)
            target.flush()
        except (OSError, ValueError):
            pass
    return write


#: The most of one line the pass-through holds at once: a longer one goes out in pieces of this size.
_LINE_LIMIT = 1 << 20


def _relay(pipe, write) -> None:
    for line in iter(lambda: pipe.readline(_LINE_LIMIT), b""):
        write(line)
    pipe.close()


def _package_root() -> str:
    """The folder holding the `pai_launch` package, so the agent imports this very copy."""
    return str(Path(__file__).resolve().parent.parent)
