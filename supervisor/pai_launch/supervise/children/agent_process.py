"""The node's agent process as the supervisor drives it: `python -m pai_launch.agent.main`, started once per run (or
again after a kill) and handed one generation at a time, with a thread that turns its reports into the loop's
events: AgentStarted, AgentTookRequest, AgentJoined, AgentReported, AgentGone and AgentAnswered (its heartbeat).

Own session, stdin from /dev/null, SIGKILLed by the kernel if pai-launch dies. Making one starts nothing: `start()`
does (so its reports can be tested without a process).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil

from pai_launch.core.observations import (
    AgentAnswered,
    AgentGone,
    AgentJoined,
    AgentReported,
    AgentStarted,
    AgentTookRequest,
)
from pai_launch.supervise.children import passthrough
from pai_launch.supervise.children.threads import Report, start_guarded
from pai_launch.supervise.job import plan
from pai_launch.supervise.outputs import liveline
from pai_launch.wire import codec
from pai_launch.wire.protocol import (
    REPORTS,
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
        self.started_at = 0.0
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
        self.started_at = time.monotonic()
        request_r, self._request_w = os.pipe()
        self._result_r, result_w = os.pipe()
        # Import this very copy of the package without putting it on the workers' PYTHONPATH; keep the sys.path a
        # fresh interpreter would have (less -c's leading ''), which warm workers are given.
        bootstrap = (f"import sys; cold = sys.path[1:] if sys.path[:1] == [''] else sys.path[:]; "
                     f"sys.path.insert(0, {plan.package_root()!r}); from pai_launch.agent.main import main; "
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
                threading.Thread(target=passthrough.relay, args=(pipe, passthrough.writer(stream, self._live)),
                                 name=f"agent-{stream}",
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
        self._write(request)

    def _write(self, message) -> bool:
        """One message down the request pipe; False when the agent died (its end of the result pipe says so)."""
        try:
            os.write(self._request_w, codec.encode(message))
        except OSError:
            return False
        return True

    def ping(self, now: float, every: float) -> None:
        """The heartbeat: a ping once the last was answered and `every` seconds have passed; AgentAnswered follows."""
        with self._lock:
            if self._ping_out or now - self._pinged_at < every or self._request_w < 0:
                return
            self._ping_seq += 1
            self._ping_out, self._pinged_at = True, now
            seq = self._ping_seq
        self._write(Ping(seq))

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
            self._write(Cancel(running.generation))
        return False

    def stop_job(self, stop: StopJob) -> None:
        """Have the agent raise the job's stop flag in node 0's store (running a generation or not)."""
        if self._request_w >= 0 and not self._write(stop):
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
        """One of the agent's reports, turned into the loop's event (anything else changes nothing)."""
        heard = _HEARD.get(type(message))
        if heard is not None:
            heard(self, message, time.monotonic())

    def _on_ready(self, message: AgentReady, now: float) -> None:
        """Ready (again): a request that waited goes out; the first ready is the agent's account of itself."""
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

    def _on_joined(self, message: Joined, now: float) -> None:
        self._report(AgentJoined(self.pid, message.generation, message.failures, now))

    def _on_pong(self, message: Pong, now: float) -> None:
        with self._lock:
            self._ping_out = False
        self._report(AgentAnswered(self.pid, now))

    def _on_stop_raised(self, message: StopRaised, now: float) -> None:
        self.stop_raised.set()

    def _on_forkserver_restarted(self, message: ForkserverRestarted, now: float) -> None:
        with self._lock:
            self.facts = replace(self.facts or AgentReady(warm=True), forkserver=message.pid)
            facts = self.facts
        self._report(AgentStarted(self.pid, facts, now, restarted_why=message.why or "the forkserver had died"))

    def _on_went_cold(self, message: WentCold, now: float) -> None:
        with self._lock:
            self.facts = AgentReady(warm=False, why=message.why)
            facts = self.facts
        self._report(AgentStarted(self.pid, facts, now, went_cold=True))

    def _on_retiring(self, message: Retiring, now: float) -> None:
        self._retiring = message.why

    def _on_result(self, message: GenerationResult, now: float) -> None:
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


#: What each of the agent's reports (every REPORTS type) does.
_HEARD = {
    AgentReady: Agent._on_ready,
    Joined: Agent._on_joined,
    Pong: Agent._on_pong,
    StopRaised: Agent._on_stop_raised,
    ForkserverRestarted: Agent._on_forkserver_restarted,
    WentCold: Agent._on_went_cold,
    Retiring: Agent._on_retiring,
    GenerationResult: Agent._on_result,
}



#: Seconds an agent may take to report ready (import torch, start its forkserver) before that is said; then again at
#: each doubling. AGENT_SLOW_START_TEST_ENV shortens it for pai-launch's own tests.
AGENT_SLOW_START = 60.0
AGENT_SLOW_START_TEST_ENV = "PAI_LAUNCH_TEST_AGENT_SLOW_START"


def slow_start_due(waited: float, told: int, first: float = AGENT_SLOW_START) -> bool:
    """Whether an agent not ready after `waited` seconds is to be reported now, `told` reports made so far."""
    return waited >= first * 2 ** told
