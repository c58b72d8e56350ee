"""Every process pai-launch starts, and the guarantee that none outlives it.

The table holds the init or DataParallel process and the node's agent (one for the whole run, started
ahead so torch is imported and its forkserver warm before the first generation), and remembers every
descendant: it signals the run's processes, kills them all, reaps orphans re-parented to us (we are a
child subreaper) and, on close(), sweeps whatever is left. It also owns the private folder for the
workers' log files and the agent's temporary files, each locked for the run's life (privatedir).

A run's files (per-rank logs, warm worker records) go where runfolders.py says; how children start, spawn.py.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from pai_launch.core.observations import (
    AgentAnswered,
    AgentGone,
    AgentJoined,
    AgentReported,
    AgentTookRequest,
    ProcessExited,
    Role,
)
from pai_launch.core.state import STOP_SIGNALS
from pai_launch.linux import privatedir, procs
from pai_launch.supervise.children.agent_process import Agent
from pai_launch.supervise.children.plain_process import PlainProcess
from pai_launch.supervise.children.runfolders import LOG_ROOT_PREFIX, make_run_root, remove_stale_log_roots
from pai_launch.supervise.children.spawn import PROCESSES, Spawn
from pai_launch.supervise.job.plan import Command
from pai_launch.supervise.outputs import liveline
from pai_launch.wire.protocol import GenerationRequest, StopJob

FINAL_SWEEP_TIMEOUT = 2.0
#: How long an agent may take to connect to node 0's store and raise the job's stop flag.
STOP_FLAG_TIMEOUT = 10.0
#: Longest folder for the agent's temporary files: a Unix socket's path (there) may not exceed 107 bytes.
SHORT_PATH = 60
#: After its request pipe closes, how long the agent gets to stop its forkserver and leave by itself.
AGENT_EXIT_TIMEOUT = 2.0
#: How often the agent is sent the heartbeat (the machine decides how long a silence makes it hung).
HEARTBEAT_EVERY = 2.0


class ProcessTable:
    def __init__(self, *, python: str, workdir: Path, env: dict[str, str], report: Callable[[object], None],
                 log_dir: Path | None, agent_args: tuple[str, ...] = (), others: frozenset[int] = frozenset(),
                 spawn: Spawn = PROCESSES) -> None:
        """`others`: processes under pai-launch that the run did not start (made before the run's world was): never
        signalled, killed or reaped. `spawn`: how children start (real processes unless a test plays a history)."""
        self._spawn = spawn
        self._python = python
        self._workdir = workdir
        self._env = env
        self._report = report
        self._own_log_root = log_dir is None
        self.log_root = log_dir
        #: This start's own folder under log_root (open() makes it).
        self.run_root: Path | None = None
        self._descendants = procs.Descendants(others)
        self._plain: PlainProcess | None = None
        self._agent_args = agent_args
        #: The live status line the children's output goes through, if the run shows one (set before any start).
        self.live: liveline.LiveLine | None = None
        self._temp_root: Path | None = None
        #: The folders we made (locked until close()).
        self._private: list[privatedir.PrivateDir] = []
        self._agent: Agent | None = None
        #: The request the last agent left without taking, until the machine decides on a new agent for it.
        self._untaken: GenerationRequest | None = None
        #: The agent is running a generation (not just standing by for the next).
        self._agent_busy = False
        self._spared: frozenset[int] = frozenset()
        #: An agent asked to raise the job's stop flag (close() gives it a moment to do so).
        self._stopping: Agent | None = None
        #: (process, signal) pairs already sent, so a stop signal reaches late workers once and nobody twice.
        self._sent: set[tuple[psutil.Process, int]] = set()

    @property
    def child_env(self) -> dict[str, str]:
        """The environment every child starts from."""
        return dict(self._env)

    def open(self, run_id: str = "run") -> None:
        """Become a subreaper and make the log folders (not earlier: a dry run must write nothing)."""
        procs.become_subreaper()
        remove_stale_log_roots()
        if self.log_root is None:
            self.log_root = self._make_private()
        self.run_root = make_run_root(self.log_root, run_id, time.time(), os.getpid())
        # The agent's temporary files (multiprocessing's forkserver socket, whose path must stay short): in our own log
        # folder if its path is short, else in a short one of our own. Either is locked: swept only once we are gone.
        self._temp_root = self.log_root if self._own_log_root and len(str(self.log_root)) <= SHORT_PATH else None
        if self._temp_root is None:
            base = tempfile.gettempdir() if len(tempfile.gettempdir()) <= SHORT_PATH - 20 else "/tmp"
            self._temp_root = self._make_private(base)

    def _make_private(self, base: str | None = None) -> Path:
        folder = privatedir.create(f"{LOG_ROOT_PREFIX}{os.getpid()}-", base)
        self._private.append(folder)
        return folder.path

    # --- starting -------------------------------------------------------------------------------------
    def start_plain(self, role: Role, command: Command) -> int:
        self._plain = self._spawn.plain(role, command, self._env, self._report, self.live)
        return self._plain.pid

    def prepare_agent(self) -> None:
        if self._agent is None:
            self._agent = self._new_agent()

    def _new_agent(self) -> Agent:
        assert self.log_root is not None, "open() first"
        args = (*self._agent_args, "--temp-dir", str(self._temp_root))
        agent = self._spawn.agent(self._python, self._workdir, self._env, self._report, args, self.live)
        self._descendants.refresh()
        return agent

    def start_agent(self, request: GenerationRequest) -> tuple[int, bool]:
        """Hand `request` to the node's agent (a new one if there is none); (its pid, whether it was already up)."""
        had = self._agent is not None
        self.prepare_agent()
        assert self._agent is not None
        self._agent_busy = True
        self._agent.run(request)
        return self._agent.pid, had

    def agent_gone(self, pid: int, pending: GenerationRequest | None) -> bool:
        """The agent exited between generations: forget it, keeping the request it never took for replace_agent.
        False when it was not the current agent (nothing to decide)."""
        if self._agent is None or self._agent.pid != pid:
            return False
        self._agent = None
        self._untaken = pending
        return True

    def replace_agent(self, generation: int) -> int | None:
        """A new agent, handed the request for `generation` the last one left untaken (its pid); None when there is
        no such request."""
        request, self._untaken = self._untaken, None
        if request is None or request.generation != generation:
            return None
        return self.start_agent(request)[0]

    def generation_log_dir(self, generation: int) -> str:
        assert self.run_root is not None, "open() first"
        return str(self.run_root / f"generation-{generation}")

    def is_current_agent(self, pid: int) -> bool:
        return self._agent is not None and self._agent.pid == pid

    def stop_job(self, stop: StopJob) -> bool:
        """Through the agent (running a generation or not): raise the job's stop flag. False: no agent to ask."""
        if self._agent is None:
            return False
        self._agent.stop_job(stop)
        self._stopping = self._agent
        return True

    @property
    def agent_pid(self) -> int | None:
        return None if self._agent is None else self._agent.pid

    def heartbeat(self, now: float, every: float = HEARTBEAT_EVERY) -> None:
        """Ping the agent (if there is one); its answer reaches the loop as AgentAnswered."""
        if self._agent is not None:
            self._agent.ping(now, every)

    def agent_waiting(self, now: float) -> tuple[int, float] | None:
        """(pid, seconds since it started) of an agent that has not reported ready yet; None otherwise."""
        agent = self._agent
        if agent is None or agent.facts is not None:
            return None
        return agent.pid, now - agent.started_at

    def run_started(self) -> bool:
        """The init run, the DataParallel process or a generation's agent is running."""
        return self._plain is not None or self._agent_busy

    # --- ends -----------------------------------------------------------------------------------------
    def learn(self, raw: object) -> bool:
        """What the threads report of the table's children, learned before anything is judged: the plain process
        ended, an agent's generation ended (the agent with it, where no result came), an agent gone between
        generations. False: a report of an agent the run no longer runs, with nothing left to decide."""
        if isinstance(raw, ProcessExited):
            self._plain = None
            return True
        if isinstance(raw, AgentReported):
            return self.agent_ended(raw.agent_pid, alive=raw.result is not None)
        if isinstance(raw, AgentGone):
            return self.agent_gone(raw.agent_pid, raw.pending)
        if isinstance(raw, (AgentAnswered, AgentTookRequest, AgentJoined)):
            return self.is_current_agent(raw.agent_pid)
        return True

    def agent_ended(self, pid: int, alive: bool) -> bool:
        """The generation of agent `pid` ended (the agent died with it unless `alive`); False for a report from an agent
        we no longer run."""
        if self._agent is None or self._agent.pid != pid or not self._agent_busy:
            return False
        self._agent_busy = False
        if not alive:
            self._agent = None
        return True

    # --- signals --------------------------------------------------------------------------------------
    def run_processes(self) -> list[psutil.Process]:
        """Where a signal for "the run" goes: the init/DataParallel process, or the agent's workers (not the agent)."""
        try:
            if self._plain is not None:
                return self._plain.processes()
            if self._agent is not None and self._agent_busy:
                return self._agent.workers()
        except psutil.Error:
            pass
        return []

    def signal_run(self, signum: int, *, only_new: bool = False) -> list[int]:
        """Send `signum` to the run's processes. A stop signal for a generation whose workers the agent has not
        started yet is delivered by never starting them (the request is withdrawn, or cancelled in the agent)."""
        if signum in STOP_SIGNALS and not only_new and self._agent is not None and self._agent_busy:
            self._agent.withdraw()
        sent = []
        for proc in self.run_processes():
            if only_new and (proc, signum) in self._sent:
                continue
            if self._spawn.signal(proc.pid, signum):
                sent.append(proc.pid)
            self._sent.add((proc, signum))
        return sent

    def spare(self, pid: int) -> None:
        """A process the run's kill leaves alone (node 0's job store: the other nodes need it); close() still sweeps
        it."""
        self._spared = self._spared | {pid}

    def kill_all(self) -> int:
        """SIGKILL every descendant but the spared; the agent goes with them (a retry starts a new one). A running
        agent is forgotten when its end is reported (the generation's end), an idle one now."""
        self._descendants.refresh()
        count = self._spawn.kill(self._descendants, self._spared)
        if not self._agent_busy:
            self._drop_agent()
        return count

    def housekeeping(self) -> None:
        """Remember new descendants and reap the orphans re-parented to us (never our own children)."""
        self._descendants.refresh()
        own = {child.pid for child in (self._plain, self._agent) if child is not None}
        self._descendants.reap_adopted(own)

    def close(self) -> tuple[int, list[int]]:
        """Leave nothing behind: let the agent go, kill and reap every descendant, remove our log folder.

        Returns (processes killed, pids that survived the sweep).
        """
        if self._stopping is not None:
            self._stopping.stop_raised.wait(STOP_FLAG_TIMEOUT)  # set on EOF too: a dead agent raises nothing
        agent = self._agent
        self._drop_agent()
        if agent is not None:
            try:
                agent.popen.wait(AGENT_EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        self._descendants.refresh()
        killed, survivors = 0, []
        if self._descendants.alive():
            killed = self._descendants.kill_all()
            survivors = [proc.pid for proc in self._descendants.wait_gone(FINAL_SWEEP_TIMEOUT)]
        self._descendants.reap_adopted(set())
        for folder in self._private:
            folder.remove()
        self._private = []
        return killed, survivors

    def _drop_agent(self) -> None:
        if self._agent is not None:
            self._agent.close()
            self._agent = None
            self._agent_busy = False
