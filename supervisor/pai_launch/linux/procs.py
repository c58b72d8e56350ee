"""Process plumbing on Linux: parent-death signals, subreaping, process groups, and the no-orphans sweep.

Every child pai-launch starts runs in its own session (so a terminal's Ctrl+C reaches it only through
pai-launch, once) and dies with its parent (PR_SET_PDEATHSIG), so even `kill -9` of pai-launch
leaves nothing running. pai-launch is a child subreaper, so orphaned grandchildren come back to it
and are swept before it exits.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

import psutil

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

#: Runs as `python -S -c EXEC_WITH_PDEATHSIG PARENT_PID PROGRAM ARGS...`: arm SIGKILL-on-parent-death,
#: make sure the parent did not die before that, then become PROGRAM (exec keeps the setting; a name without a
#: slash is looked up on PATH, as a shell would: --no-python's program).
EXEC_WITH_PDEATHSIG = (
    "import ctypes,os,sys\n"
    "ctypes.CDLL(None,use_errno=True).prctl(1,9,0,0,0)\n"
    "if os.getppid()!=int(sys.argv[1]):os._exit(137)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)


def dies_with_parent(argv: tuple[str, ...] | list[str], python: str = sys.executable) -> list[str]:
    """Wrap argv so the process is SIGKILLed when the calling process (thread) dies."""
    return [python, "-S", "-c", EXEC_WITH_PDEATHSIG, str(os.getpid()), *argv]


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Orphaned descendants re-parent to us instead of PID 1, so the sweep can find and reap them."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def own_descendants() -> frozenset[int]:
    """The pids under this process now."""
    try:
        return frozenset(proc.pid for proc in psutil.Process().children(recursive=True))
    except psutil.Error:
        return frozenset()


def set_parent_death_signal(signum: int) -> bool:
    return _prctl(_PR_SET_PDEATHSIG, int(signum))


def signal_group(pid: int, signum: int) -> bool:
    """Signal the process group led by `pid` (our children are session leaders); tolerate races."""
    try:
        os.killpg(pid, signum)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def signal_pid(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def is_running(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        return _is_live(psutil.Process(pid))
    except psutil.Error:
        return False


class Descendants:
    """Every process started under us, remembered by (pid, create_time) so pid reuse never misleads us."""

    def __init__(self, others: frozenset[int] = frozenset()) -> None:
        """`others`: processes under us that are not ours to sweep, nor any process under them (a test host's own
        servers, when a run is supervised inside it)."""
        self._root = psutil.Process()
        self._seen: dict[int, psutil.Process] = {}
        self._others = others

    def refresh(self) -> list[psutil.Process]:
        """Snapshot our descendants now; keep remembering those seen before (they may have been orphaned)."""
        try:
            current = [proc for proc in self._root.children(recursive=True) if not self._is_others(proc)]
        except psutil.Error:
            current = []
        for proc in current:
            self._seen.setdefault(proc.pid, proc)
        return current

    def _is_others(self, proc: psutil.Process) -> bool:
        if not self._others:
            return False
        if proc.pid in self._others:
            return True
        try:
            return any(parent.pid in self._others for parent in proc.parents())
        except psutil.Error:
            return False

    def alive(self) -> list[psutil.Process]:
        live = []
        for pid, proc in list(self._seen.items()):
            if _is_live(proc):
                live.append(proc)
            else:
                self._seen.pop(pid, None)
        return live

    def reap_adopted(self, own_children: set[int]) -> list[tuple[int, int]]:
        """waitpid() zombies that were re-parented to us, never our own Popen children (they keep their status)."""
        reaped = []
        try:
            children = self._root.children()
        except psutil.Error:
            return reaped
        for proc in children:
            if proc.pid in own_children or proc.pid in self._others:
                continue
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    continue
                pid, status = os.waitpid(proc.pid, os.WNOHANG)
            except (psutil.Error, ChildProcessError):
                continue
            if pid:
                reaped.append((pid, status))
        return reaped

    def kill_all(self, spare: frozenset[int] = frozenset()) -> int:
        """SIGKILL every remembered live descendant (but `spare`) and its process group; return how many were alive."""
        self.refresh()
        live = [proc for proc in self.alive() if proc.pid not in spare]
        for proc in live:
            try:
                pgid = os.getpgid(proc.pid)
            except ProcessLookupError:
                continue
            if pgid == proc.pid:
                signal_group(pgid, signal.SIGKILL)
            signal_pid(proc.pid, signal.SIGKILL)
        return len(live)

    def wait_gone(self, timeout: float) -> list[psutil.Process]:
        """Poll until every remembered descendant is gone (or a zombie); return the survivors.

        Polling, not psutil.wait_procs: that would waitpid() our own Popen children behind their back.
        """
        deadline = time.monotonic() + timeout
        while True:
            survivors = self.alive()
            if not survivors or time.monotonic() >= deadline:
                return survivors
            time.sleep(0.02)


def _is_live(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
