"""Shared fixtures for every tier.

- This pytest process becomes a child subreaper: a process orphaned by a test (for example after
  `kill -9` of pai-launch, itself a subreaper) re-parents to pytest instead of PID 1, so the
  no_orphans check below still sees it as a descendant.
- `no_orphans` (autouse): no process started during a test may outlive it.
"""

from __future__ import annotations

import psutil
import pytest

from tests.helpers import (become_subreaper, describe, is_live, kill_processes, processes_mentioning, reap_zombie_children,
                           wait_until_empty)

#: How long processes a test started may take to vanish after it (pai-launch's own sweep takes up to 2 s).
ORPHAN_WAIT_S = 3.0


def pytest_configure(config: pytest.Config) -> None:
    become_subreaper()  # not Linux: orphans go to PID 1 and only the command-line check sees them


def _key(proc: psutil.Process) -> tuple[int, float]:
    try:
        return proc.pid, proc.create_time()
    except psutil.Error:
        return proc.pid, 0.0


def _descendants() -> dict[tuple[int, float], psutil.Process]:
    try:
        return {_key(proc): proc for proc in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return {}


def _reap_new_zombies(before: set[tuple[int, float]]) -> None:
    """waitpid() our own new zombie children (orphans re-parented to us), never ones that existed before."""
    reap_zombie_children(keep=lambda proc: _key(proc) in before)


@pytest.fixture(autouse=True)
def no_orphans(request: pytest.FixtureRequest):
    """Fail the test if a process it started (a descendant of pytest, or one whose command line names its
    tmp_path) is still alive ORPHAN_WAIT_S after it ended; kill such leftovers either way."""
    before = set(_descendants())
    yield
    tmp_path = request.node.funcargs.get("tmp_path") if hasattr(request.node, "funcargs") else None

    def leftovers() -> list[psutil.Process]:
        _reap_new_zombies(before)
        live = {proc.pid: proc for key, proc in _descendants().items() if key not in before and is_live(proc)}
        if tmp_path is not None:
            for proc in processes_mentioning(str(tmp_path)):
                live.setdefault(proc.pid, proc)
        return list(live.values())

    left = wait_until_empty(leftovers, ORPHAN_WAIT_S, interval=0.05)
    if left:
        names = [describe(proc) for proc in left]
        kill_processes(left)
        psutil.wait_procs(left, timeout=2)
        _reap_new_zombies(before)
        pytest.fail(f"processes outlived the test by {ORPHAN_WAIT_S} s: {names}", pytrace=False)
