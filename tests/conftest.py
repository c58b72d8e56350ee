"""Shared fixtures for every tier.

- This pytest process becomes a child subreaper: a process orphaned by a test (for example after
  `kill -9` of pai-launch, itself a subreaper) re-parents to pytest instead of PID 1, so the
  no_orphans check below still sees it as a descendant.
- `no_orphans` (autouse): no process started during a test may outlive it.
- Marks follow the folder (FOLDER_MARKS), and a test that starts a process without the `proc` mark fails
  (`spawns_are_marked`: an audit hook sees every fork, exec and spawn), so `-m "not proc"` runs only what is pure.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from tests.helpers import (
    become_subreaper,
    describe,
    is_live,
    kill_processes,
    processes_mentioning,
    reap_zombie_children,
    wait_until_empty,
)

#: How long processes a test started may take to vanish after it (pai-launch's own sweep takes up to 2 s).
ORPHAN_WAIT_S = 3.0
#: Scripts doctor reads (some real projects' own test files among them): input, never tests to collect.
collect_ignore = ["doctor_scripts"]


TESTS = Path(__file__).resolve().parent
#: Each tier's folder and the marks every test in it carries.
FOLDER_MARKS = {
    "proc": ("proc",), "chaos": ("proc",), "container": ("proc",), "real": ("proc", "torch"),
    "slurm": ("proc", "slurm"),
    "compat": ("proc", "compat"),
}
#: Audit events that start a process (os.exec* included: a test that replaces itself is not pure either).
SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.system",
                          "os.exec", "pty.spawn"})
#: Programs a library runs once per machine to build a cache (matplotlib's font list), or once per process as it is
#: imported (ctypes.util.find_library's `ldconfig -p`, which a CUDA build of torch runs on import): the first test to
#: import it would be blamed for a process it did not start.
CACHE_BUILDERS = frozenset({"fc-list", "ldconfig"})
_spawned: list[str] = []


def _record_spawns(event: str, args: tuple) -> None:
    if event not in SPAWN_EVENTS:
        return
    if event == "subprocess.Popen" and args and os.path.basename(str(args[0] or "")) in CACHE_BUILDERS:
        return
    if event == "subprocess.Popen" and len(args) > 1 and isinstance(args[1], (list, tuple)) and args[1] \
            and os.path.basename(str(args[1][0])) in CACHE_BUILDERS:
        return
    _spawned.append(event)


def pytest_configure(config: pytest.Config) -> None:
    become_subreaper()  # not Linux: orphans go to PID 1 and only the command-line check sees them
    sys.addaudithook(_record_spawns)


#: Tests that share one thing on the machine (a cluster, an image, an environment, fixed namespace names, the local
#: users) run in one pytest-xdist worker: their folder's or file's group (a test file's path under tests/).
SHARED_GROUPS = {
    "slurm": "slurm-cluster", "container": "container-image", "compat": "torch-environments",
    "real/test_multinode_real.py": "two-host-namespaces", "proc/test_launch_local_users.py": "local-users",
}


def shared_group(parts: tuple[str, ...]) -> str | None:
    """The group of a test file (its path's parts under tests/): its own, else its folder's."""
    return SHARED_GROUPS.get("/".join(parts)) or SHARED_GROUPS.get(parts[0])


def scope_of(nodeid: str) -> str:
    """What pytest-xdist hands one worker as a unit: a shared group's tests together, any other test alone."""
    path = nodeid.split("::", 1)[0].split("/")
    group = shared_group(tuple(path[1:])) if path[0] == "tests" and len(path) > 1 else None
    return f"group:{group}" if group else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Load scheduling that keeps each shared group in one worker. (xdist's own `loadgroup` reads xdist_group marks
    into test ids by setting Item._nodeid, which pytest 9 no longer reads: its groups would be split.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SharedGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SharedGroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            parts = Path(str(item.fspath)).resolve().relative_to(TESTS).parts
        except ValueError:
            continue
        for mark in FOLDER_MARKS.get(parts[0], ()):
            item.add_marker(mark)


@pytest.fixture(autouse=True)
def spawns_are_marked(request: pytest.FixtureRequest):
    """A test that starts a process carries the `proc` mark (its folder's, or its own)."""
    before = len(_spawned)
    yield
    if len(_spawned) > before and request.node.get_closest_marker("proc") is None:
        pytest.fail(f"the test started a process ({_spawned[before]}) without the proc mark: add "
                    "pytestmark = pytest.mark.proc (or move it to tests/proc)", pytrace=False)


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


# --- tiers that did not run -------------------------------------------------------------------------
#: PAI_LAUNCH_ALL_TIERS=1 (.ci/run sets it): a skipped test is a failure, so no tier can quietly not run.
ALL_TIERS_ENV = "PAI_LAUNCH_ALL_TIERS"


def _tier(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.skipped and os.environ.get(ALL_TIERS_ENV) == "1" and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, but {ALL_TIERS_ENV}=1 requires every tier to run: {_skip_reason(report)}"


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    """One line per tier that had tests skipped, with the reasons, just above pytest's own summary line."""
    by_tier: dict[str, dict[str, int]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reasons = by_tier.setdefault(_tier(report.nodeid), {})
        reason = _skip_reason(report)
        reasons[reason] = reasons.get(reason, 0) + 1
    for tier, reasons in sorted(by_tier.items()):
        said = "; ".join(f"{count} skipped: {reason}" for reason, count in reasons.items())
        terminalreporter.write_line(f"tier {tier} did not fully run: {said}", yellow=True)
