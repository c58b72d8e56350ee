"""Every process pai-launch starts, and the guarantee that none outlives it.

The table holds the init or DataParallel process, the generation's agent and the next one's
(started ahead so torch is already imported), and remembers every descendant: it signals the
run's processes, kills them all, reaps orphans re-parented to us (we are a child subreaper) and, on
close(), sweeps whatever is left. It also owns the private folder for the workers' log files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import psutil

from pai_launch import procs
from pai_launch.children import Agent, PlainProcess
from pai_launch.events import Role
from pai_launch.plan import Command
from pai_launch.protocol import GenerationRequest, StopJob

FINAL_SWEEP_TIMEOUT = 2.0
#: How long a standby agent may take to connect to node 0's store and raise the job's stop flag.
STOP_FLAG_TIMEOUT = 10.0
LOG_ROOT_PREFIX = "pai-launch-logs-"


def remove_stale_log_roots() -> None:
    """Private log folders of pai-launch processes that were killed (kill -9 skips our cleanup)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{LOG_ROOT_PREFIX}*-*"):
        pid = folder.name[len(LOG_ROOT_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)) and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


class ProcessTable:
    def __init__(self, *, python: str, workdir: Path, env: dict[str, str], report: Callable[[object], None],
                 log_dir: Path | None) -> None:
        self._python = python
        self._workdir = workdir
        self._env = env
        self._report = report
        self._own_log_root = log_dir is None
        self.log_root = log_dir
        self._descendants = procs.Descendants()
        self._plain: PlainProcess | None = None
        self._agent: Agent | None = None
        self._standby: Agent | None = None
        self._spared: frozenset[int] = frozenset()
        #: A standby asked to raise the job's stop flag (close() gives it a moment to do so).
        self._stopping_standby: Agent | None = None
        #: (process, signal) pairs already sent, so a stop signal reaches late workers once and nobody twice.
        self._sent: set[tuple[psutil.Process, int]] = set()

    @property
    def child_env(self) -> dict[str, str]:
        """The environment every child starts from."""
        return dict(self._env)

    def open(self) -> None:
        """Become a subreaper and make the private log folder (not earlier: a dry run must write nothing)."""
        procs.become_subreaper()
        if self.log_root is None:
            remove_stale_log_roots()
            self.log_root = Path(tempfile.mkdtemp(prefix=f"{LOG_ROOT_PREFIX}{os.getpid()}-"))

    # --- starting -------------------------------------------------------------------------------------
    def start_plain(self, role: Role, command: Command) -> int:
        self._plain = PlainProcess(role, command, self._env, self._report)
        return self._plain.pid

    def prepare_agent(self) -> None:
        if self._standby is None:
            self._standby = Agent(self._python, self._workdir, self._env, self._report)
            self._descendants.refresh()

    def start_agent(self, request: GenerationRequest) -> tuple[int, bool]:
        """Hand `request` to the standby agent (or a new one); (its pid, whether it was started ahead)."""
        warm = self._standby is not None
        agent = self._standby or Agent(self._python, self._workdir, self._env, self._report)
        self._standby = None
        self._agent = agent
        agent.run(request)
        return agent.pid, warm

    def generation_log_dir(self, generation: int) -> str:
        assert self.log_root is not None, "open() first"
        return str(self.log_root / f"generation-{generation}")

    def is_current_agent(self, pid: int) -> bool:
        return self._agent is not None and self._agent.pid == pid

    def stop_job(self, stop: StopJob) -> bool:
        """Through the running agent, else the standby: raise the job's stop flag. False: no agent to ask."""
        agent = self._agent or self._standby
        if agent is None:
            return False
        agent.stop_job(stop)
        if agent is self._standby:
            self._standby = None  # it exits once the flag is raised; the table still sweeps it at close
            self._stopping_standby = agent
        return True

    def run_started(self) -> bool:
        """The init run, the DataParallel process or a generation's agent is running."""
        return self._plain is not None or self._agent is not None

    # --- ends -----------------------------------------------------------------------------------------
    def plain_ended(self) -> None:
        self._plain = None

    def agent_ended(self, pid: int) -> bool:
        """Forget the current agent if `pid` is it; False for a report from an agent we no longer run."""
        if self._agent is None or self._agent.pid != pid:
            return False
        self._agent = None
        return True

    # --- signals --------------------------------------------------------------------------------------
    def run_processes(self) -> list[psutil.Process]:
        """Where a signal for "the run" goes: the init/DataParallel process, or the agent's workers (not the agent)."""
        try:
            if self._plain is not None:
                return [psutil.Process(self._plain.pid)]
            if self._agent is not None:
                return psutil.Process(self._agent.pid).children()
        except psutil.Error:
            pass
        return []

    def signal_run(self, signum: int, *, only_new: bool = False) -> list[int]:
        sent = []
        for proc in self.run_processes():
            if only_new and (proc, signum) in self._sent:
                continue
            if procs.signal_group(proc.pid, signum) or procs.signal_pid(proc.pid, signum):
                sent.append(proc.pid)
            self._sent.add((proc, signum))
        return sent

    def spare(self, pid: int) -> None:
        """A process the run's kill leaves alone (node 0's job store: the other nodes need it); close() still sweeps it."""
        self._spared = self._spared | {pid}

    def kill_all(self) -> int:
        """SIGKILL every descendant but the spared; the standby agent goes with them (a retry must not be handed a dead
        one)."""
        count = self._descendants.kill_all(self._spared)
        self._discard_standby()
        return count

    def housekeeping(self) -> None:
        """Remember new descendants and reap the orphans re-parented to us (never our own children)."""
        self._descendants.refresh()
        own = {child.pid for child in (self._plain, self._agent, self._standby) if child is not None}
        self._descendants.reap_adopted(own)

    def close(self) -> tuple[int, list[int]]:
        """Leave nothing behind: drop the standby agent, kill and reap every descendant, remove our log folder.

        Returns (processes killed, pids that survived the sweep).
        """
        self._discard_standby()
        if self._stopping_standby is not None:
            try:
                self._stopping_standby.popen.wait(STOP_FLAG_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        self._descendants.refresh()
        killed, survivors = 0, []
        if self._descendants.alive():
            killed = self._descendants.kill_all()
            survivors = [proc.pid for proc in self._descendants.wait_gone(FINAL_SWEEP_TIMEOUT)]
        self._descendants.reap_adopted(set())
        if self._own_log_root and self.log_root is not None:
            shutil.rmtree(self.log_root, ignore_errors=True)
        return killed, survivors

    def _discard_standby(self) -> None:
        if self._standby is not None:
            self._standby.discard()
            self._standby = None
