"""A plain child: the init run or the DataParallel process (one without the agent), with a thread that passes its
output through to ours, keeps its last lines for error messages, and reports its end (ProcessExited) to the loop's
inbox.

Own session, stdin from /dev/null, SIGKILLed by the kernel if pai-launch dies. Making one starts nothing: `start()`
does (so what decides to start one can be tested without a process).
"""

from __future__ import annotations

import collections
import subprocess
import time

import psutil

from pai_launch.core.observations import ProcessExited, Role
from pai_launch.linux import procs
from pai_launch.supervise.children import passthrough
from pai_launch.supervise.children.threads import Report, start_guarded
from pai_launch.supervise.job.plan import Command
from pai_launch.supervise.outputs import liveline

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
        write = passthrough.writer("stdout", self._live)
        assert self.popen.stdout is not None
        for line in iter(self.popen.stdout.readline, b""):
            self._tail.append(line.decode(errors="replace").rstrip("\n"))
            write(line)
        returncode = self.popen.wait()
        self._report(ProcessExited(self.role, returncode, "\n".join(self._tail), time.monotonic()))

    def processes(self) -> list[psutil.Process]:
        """Where a signal for the run goes while this process is the run: the process itself (while it runs)."""
        try:
            return [psutil.Process(self.pid)]
        except psutil.Error:
            return []
