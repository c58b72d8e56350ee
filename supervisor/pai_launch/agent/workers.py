"""Agent side: see every worker exit the moment it happens, with its rank and exit status.

torch's elastic agent learns of a worker's exit by polling and then spends a while on its own
teardown (exit barrier, rendezvous shutdown). A cold worker is the agent's child: waitid(WNOWAIT)
sees each exit at once without reaping the process, so torch's Popen still gets the status. A warm
worker is the forkserver's child: a pidfd shows its exit, and the worker's own record (forkserver.worker_main)
its rank and exit code; for one killed before it could write its end, the forkserver records the
status as it reaps it (forkserver.server_hooks). Once every worker has exited the agent can report.
"""

from __future__ import annotations

import json
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

DISCOVERY_INTERVAL = 0.02
#: How long a killed warm worker's status may take to reach EXITS/<pid> (the forkserver reaps it on SIGCHLD).
SERVER_STATUS_WAIT = 2.0


@dataclass(frozen=True)
class WorkerExit:
    pid: int
    rank: int | None
    #: Popen-style: the exit code, or -N for signal N.
    returncode: int
    #: time.monotonic() when the exit was seen.
    at: float
    #: LOCAL_RANK (where torch keeps its log files); the same as `rank` on one machine.
    local_rank: int | None = None


def helper_pids() -> list[int]:
    """The agent's own helper processes (multiprocessing's resource tracker and forkserver), never workers."""
    pids = []
    try:
        from multiprocessing import forkserver, resource_tracker

        pids = [resource_tracker._resource_tracker._pid, forkserver._forkserver._forkserver_pid]
    except (ImportError, AttributeError):
        pass
    return [pid for pid in pids if pid]


def returncode_of(result: os.waitid_result) -> int:
    return result.si_status if result.si_code == os.CLD_EXITED else -result.si_status


def worker_env(pid: int, timeout: float = 5.0) -> dict[str, str] | None:
    """The worker's environment once it holds its RANK (absent between fork and exec); None if it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            env = psutil.Process(pid).environ()
        except psutil.Error:
            return None
        if env.get("RANK", "").isdigit():
            return env
        time.sleep(0.005)
    return None


def rank_of(pid: int, timeout: float = 5.0) -> int | None:
    """The worker's global RANK from its environment; None if it never shows one."""
    env = worker_env(pid, timeout)
    return None if env is None else int(env["RANK"])


class WorkerWatch:
    """Watches this process's children (the workers); calls `on_all_exited(exits)` once all `nproc` are gone.

    It stays silent when it could not see every worker's rank and status (a worker reaped before we
    saw it): the caller then relies on torch's own result.
    """

    def __init__(self, nproc: int, on_all_exited: Callable[[list[WorkerExit]], None], *, parent: int | None = None,
                 records: str | None = None, exits: str | None = None, blind: bool = False,
                 late: tuple[int, float] | None = None) -> None:
        """Cold: the workers are this process's children. Warm: `parent` (the forkserver) forks them and each writes
        RECORDS/<pid>.json; the server writes EXITS/<pid> with the status of each one it reaped. Tests only: `blind`,
        it sees no worker, as when each is reaped before it looks; `late` (rank, seconds), it sees that rank's exit
        late, as when its thread waits for a busy CPU."""
        self._nproc = nproc
        self._parent = parent
        self._records = records
        self._exits = exits
        self._on_all_exited = on_all_exited
        self._late = late
        self._lock = threading.Lock()
        self._watched: set[int] = set()
        self.exits: dict[int, WorkerExit] = {}
        #: time.monotonic() each exit was seen, a killed warm worker's too (its status is torch's to report).
        self._seen_at: dict[int, float] = {}
        #: Global rank of each worker seen so far, and (GROUP_RANK, GROUP_WORLD_SIZE) from the first one.
        self.ranks: dict[int, int] = {}
        self.group: tuple[int, int] | None = None
        self._done = threading.Event()
        if not blind:
            threading.Thread(target=self._discover, name="worker-watch", daemon=True).start()

    def processes(self) -> list[psutil.Process]:
        """The workers now running."""
        try:
            if self._parent:
                return psutil.Process(self._parent).children()
            helpers = set(helper_pids())
            return [child for child in psutil.Process().children() if child.pid not in helpers]
        except psutil.Error:
            return []

    def _discover(self) -> None:
        while not self._done.wait(DISCOVERY_INTERVAL):
            # A warm worker is found by its record, which outlives it (a quick one may be gone between two looks).
            pids = self._recorded() if self._parent else [child.pid for child in self.processes()]
            for pid in pids:
                if pid not in self._watched:
                    self._watched.add(pid)
                    target = self._await_warm_exit if self._parent else self._await_exit
                    threading.Thread(target=target, args=(pid,), daemon=True).start()

    def _recorded(self) -> list[int]:
        try:
            names = os.listdir(self._records)
        except OSError:
            return []
        return [int(name[:-5]) for name in names if name.endswith(".json") and name[:-5].isdigit()]

    def _await_warm_exit(self, pid: int) -> None:
        try:
            fd: int | None = os.pidfd_open(pid)
        except OSError:
            fd = None  # gone already: its record says how, if it could write one
        if fd is not None:
            self._forget_server_status(pid)  # it runs: a status under its pid is an earlier worker's
        try:
            record = self._record(pid, lambda r: r.get("rank") is not None, timeout=5.0)
            if record is not None:
                self._remember(pid, record)
            if fd is not None:
                select.select([fd], [], [])
        finally:
            if fd is not None:
                os.close(fd)
        self._lag(None if record is None else record.get("rank"))
        at = time.monotonic()
        if fd is not None:
            self._seen_at.setdefault(pid, at)
        record = self._record(pid, lambda r: "exit" in r, timeout=0.0)
        if record is None:  # killed (no record of its end): the server that reaped it knows how it died
            record = self._record(pid, lambda r: r.get("rank") is not None, timeout=0.0)
            status = self._server_status(pid) if record is not None else None
            if status is None:
                return  # torch reports its status
            record = {**record, "exit": status}
        if record.get("rank") is None:
            return
        rank, local = int(record["rank"]), record.get("local_rank")
        self._exited(WorkerExit(pid, rank, int(record["exit"]), at, int(local) if str(local).isdigit() else rank))

    def _server_status(self, pid: int, timeout: float = SERVER_STATUS_WAIT) -> int | None:
        """The exit status the forkserver recorded when it reaped `pid` (it reaps on SIGCHLD, a moment after the
        exit); None when there is none in time."""
        if self._exits is None:
            return None
        path = os.path.join(self._exits, str(pid))
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(path) as handle:
                    text = handle.read().strip()
                if text.lstrip("-").isdigit():
                    return int(text)
            except OSError:
                pass
            if time.monotonic() >= deadline or self._done.is_set():
                return None
            time.sleep(0.005)

    def _forget_server_status(self, pid: int) -> None:
        if self._exits is not None:
            try:
                os.unlink(os.path.join(self._exits, str(pid)))
            except OSError:
                pass

    def _record(self, pid: int, ready: Callable[[dict], bool], timeout: float) -> dict | None:
        assert self._records is not None
        path = os.path.join(self._records, f"{pid}.json")
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(path) as handle:
                    record = json.load(handle)
                if ready(record):
                    return record
            except (OSError, ValueError):
                pass
            if time.monotonic() >= deadline or self._done.is_set():
                return None
            time.sleep(0.005)

    def _remember(self, pid: int, env: dict) -> None:
        with self._lock:
            self.ranks[pid] = int(env["rank"] if "rank" in env else env["RANK"])
            group, size = (env.get("group_rank"), env.get("group_world_size")) if "rank" in env else \
                (env.get("GROUP_RANK"), env.get("GROUP_WORLD_SIZE"))
            if self.group is None and str(group).isdigit() and str(size).isdigit():
                self.group = (int(group), int(size))

    def _await_exit(self, pid: int) -> None:
        env = worker_env(pid)
        rank = None if env is None else int(env["RANK"])
        local = env.get("LOCAL_RANK", "") if env is not None else ""
        local_rank = int(local) if local.isdigit() else rank
        if env is not None:
            self._remember(pid, env)
        try:
            result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:  # already reaped by torch: its status is torch's to report
            return
        if result is None:
            return
        self._lag(rank)
        self._exited(WorkerExit(pid, rank, returncode_of(result), time.monotonic(), local_rank))

    def _lag(self, rank) -> None:
        if self._late is not None and str(rank) == str(self._late[0]):
            time.sleep(self._late[1])

    def _exited(self, exit_: WorkerExit) -> None:
        pid = exit_.pid
        with self._lock:
            self.exits[pid] = exit_
            self._seen_at.setdefault(pid, exit_.at)
            complete = len(self.exits) == self._nproc and all(e.rank is not None for e in self.exits.values())
            if complete and not self._done.is_set():
                self._done.set()
                exits = sorted(self.exits.values(), key=lambda e: e.at)
            else:
                return
        self._on_all_exited(exits)

    def exit_time(self, pid: int) -> float | None:
        """time.monotonic() when worker `pid`'s exit was seen; None if it was not."""
        return self._seen_at.get(pid)

    def stop(self) -> None:
        self._done.set()
