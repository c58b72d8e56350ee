"""The processes pai-launch starts, each with a thread that reports its end to the loop's inbox.

- PlainProcess: the init run and the DataParallel process, output passed through to our stdout with
  its tail kept for error messages; reports ProcessExited.
- Agent: a `python -m pai_launch.agent` process that runs one generation per request; reports
  AgentReported.
All of them: own session, stdin from /dev/null, SIGKILLed by the kernel if pai-launch dies.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pai_launch import procs
from pai_launch.events import AgentJoined, AgentReported, ProcessExited, Role
from pai_launch.plan import Command
from pai_launch.protocol import GenerationRequest, GenerationResult, StopJob
from pai_launch.threads import start_guarded

#: Where a child's end is reported: the loop's inbox (its `put`).
Report = Callable[[object], None]

TAIL_LINES = 20


class PlainProcess:
    """One process whose output we relay line by line and whose last lines we keep."""

    def __init__(self, role: Role, command: Command, base_env: dict[str, str], report: Report) -> None:
        env = {**base_env, **command.env}
        self.role = role
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.popen = subprocess.Popen(
            procs.dies_with_parent(command.argv),
            cwd=command.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pid = self.popen.pid
        self._report = report
        start_guarded(self._pump, name=f"pump-{self.pid}", report=report)

    def _pump(self) -> None:
        out = sys.stdout.buffer
        assert self.popen.stdout is not None
        for line in iter(self.popen.stdout.readline, b""):
            self._tail.append(line.decode(errors="replace").rstrip("\n"))
            try:
                out.write(line)
                out.flush()
            except (OSError, ValueError):
                pass
        returncode = self.popen.wait()
        self._report(ProcessExited(self.role, returncode, "\n".join(self._tail), time.monotonic()))


class Agent:
    """An agent process, started ahead of time so torch is already imported when a generation begins."""

    def __init__(self, python: str, cwd: Path, base_env: dict[str, str], report: Report) -> None:
        request_r, self._request_w = os.pipe()
        self._result_r, result_w = os.pipe()
        # Import this very copy of the package without putting it on the workers' PYTHONPATH.
        bootstrap = f"import sys; sys.path.insert(0, {_package_root()!r}); from pai_launch.agent import main; main()"
        argv = [
            python, "-c", bootstrap,
            "--request-fd", str(request_r), "--result-fd", str(result_w), "--parent-pid", str(os.getpid()),
        ]
        try:
            self.popen = subprocess.Popen(
                argv, cwd=cwd, env=base_env, stdin=subprocess.DEVNULL, start_new_session=True,
                pass_fds=(request_r, result_w),
            )
        finally:
            os.close(request_r)
            os.close(result_w)
        self.pid = self.popen.pid
        self._report = report

    def run(self, request: GenerationRequest) -> None:
        """Hand the agent its generation; AgentReported follows from a thread.

        A multi-node agent keeps its request pipe open: a StopJob may follow (see stop_job)."""
        try:
            os.write(self._request_w, request.to_line())
        except BrokenPipeError:
            pass
        if request.nodes is None:
            self._close_request()
        start_guarded(self._await_result, name=f"agent-{self.pid}", report=self._report)

    def stop_job(self, stop: StopJob) -> None:
        """Have the agent raise the job's stop flag in node 0's store (it may be running or standing by)."""
        if self._request_w >= 0:
            try:
                os.write(self._request_w, stop.to_line())
            except OSError:
                pass
            self._close_request()

    def _close_request(self) -> None:
        if self._request_w >= 0:
            os.close(self._request_w)
            self._request_w = -1

    def _await_result(self) -> None:
        """Lines until EOF: `{"joined": G}` (multi-node) as soon as it comes, then the result."""
        buffer, last = b"", b""
        while True:
            chunk = os.read(self._result_r, 65536)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.startswith(b'{"joined"'):
                    joined = json.loads(line)
                    self._report(AgentJoined(self.pid, joined["joined"], joined["failures"], time.monotonic()))
                elif line.strip():
                    last = line
        os.close(self._result_r)
        self._close_request()
        result = GenerationResult.from_line(last) if last.strip() else None
        self._report(AgentReported(self.pid, result, self.popen.wait(), time.monotonic()))

    def discard(self) -> None:
        """An unused standby: closing its request pipe makes it exit; it has no workers."""
        self._close_request()
        try:
            os.close(self._result_r)
        except OSError:
            pass
        procs.signal_pid(self.pid, 9)
        self.popen.wait()


def _package_root() -> str:
    """The folder holding the `pai_launch` package, so the agent imports this very copy."""
    return str(Path(__file__).resolve().parent.parent)
