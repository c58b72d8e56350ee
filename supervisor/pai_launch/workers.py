"""Agent side: see every worker exit the moment it happens, with its rank and exit status.

torch's elastic agent learns of a worker's exit by polling and then spends a while on its own
teardown (exit barrier, rendezvous shutdown). waitid(WNOWAIT) lets us see each exit at once without
reaping the process, so torch's Popen still gets the status and behaves as usual; once every worker
has exited the agent can report and leave.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

DISCOVERY_INTERVAL = 0.02


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

    def __init__(self, nproc: int, on_all_exited: Callable[[list[WorkerExit]], None]) -> None:
        self._nproc = nproc
        self._on_all_exited = on_all_exited
        self._lock = threading.Lock()
        self._watched: set[int] = set()
        self.exits: dict[int, WorkerExit] = {}
        #: Global rank of each worker seen so far, and (GROUP_RANK, GROUP_WORLD_SIZE) from the first one.
        self.ranks: dict[int, int] = {}
        self.group: tuple[int, int] | None = None
        self._done = threading.Event()
        threading.Thread(target=self._discover, name="worker-watch", daemon=True).start()

    def _discover(self) -> None:
        me = psutil.Process()
        while not self._done.wait(DISCOVERY_INTERVAL):
            try:
                children = me.children()
            except psutil.Error:
                continue
            for child in children:
                if child.pid not in self._watched:
                    self._watched.add(child.pid)
                    threading.Thread(target=self._await_exit, args=(child.pid,), daemon=True).start()

    def _await_exit(self, pid: int) -> None:
        env = worker_env(pid)
        rank = None if env is None else int(env["RANK"])
        local = env.get("LOCAL_RANK", "") if env is not None else ""
        local_rank = int(local) if local.isdigit() else rank
        if env is not None:
            with self._lock:
                self.ranks[pid] = int(env["RANK"])
                if self.group is None and env.get("GROUP_RANK", "").isdigit() and env.get("GROUP_WORLD_SIZE", "").isdigit():
                    self.group = (int(env["GROUP_RANK"]), int(env["GROUP_WORLD_SIZE"]))
        try:
            result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:  # already reaped by torch: its status is torch's to report
            return
        if result is None:
            return
        exit_ = WorkerExit(pid, rank, returncode_of(result), time.monotonic(), local_rank)
        with self._lock:
            self.exits[pid] = exit_
            complete = len(self.exits) == self._nproc and all(e.rank is not None for e in self.exits.values())
            if complete and not self._done.is_set():
                self._done.set()
                exits = sorted(self.exits.values(), key=lambda e: e.at)
            else:
                return
        self._on_all_exited(exits)

    def exit_time(self, pid: int) -> float:
        found = self.exits.get(pid)
        return found.at if found else float("inf")

    def stop(self) -> None:
        self._done.set()
