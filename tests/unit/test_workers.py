"""The agent's worker watch: every exit of a child seen at once with its RANK and Popen-style status, through
waitid(WNOWAIT), so the child's own Popen (torch's, in the agent) still collects the true status afterwards.

The children are real processes: `python -c` with RANK in their environment, held on their stdin until the
test lets them go, then exiting with a chosen code or killing themselves with a chosen signal. WorkerWatch
watches every child of this (pytest's) process, so these tests start no other child while a watch runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from pai_launch.agent import workers
from pai_launch.agent.workers import WorkerExit, WorkerWatch, rank_of, returncode_of
from tests.helpers import reap_zombie_children, wait_until

pytestmark = pytest.mark.timeout(60)

#: A child that waits until its stdin is closed, then exits with `value` ("exit") or kills itself with it ("signal").
CHILD = """
import os, sys
sys.stdin.read()
how, value = sys.argv[1], int(sys.argv[2])
if how == "signal":
    os.kill(os.getpid(), value)  # delivered before kill() returns: a deadly signal never gets past this line
    os._exit(99)
os._exit(value)
"""


def start_child(rank: int | str | None, how: str = "exit", value: int = 0) -> subprocess.Popen:
    env = {key: item for key, item in os.environ.items() if key != "RANK"}
    if rank is not None:
        env["RANK"] = str(rank)
    return subprocess.Popen([sys.executable, "-c", CHILD, how, str(value)], env=env, stdin=subprocess.PIPE)


def release(child: subprocess.Popen) -> None:
    child.stdin.close()


def is_zombie(pid: int) -> bool:
    """Exited and not yet reaped (reading /proc reaps nothing)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def clean_up(children) -> None:
    for child in children:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.fixture
def rank_reads(monkeypatch) -> dict[int, int | None]:
    """pid -> the rank WorkerWatch read for it, recorded as the real worker_env returns: a child may only exit once its
    rank was read (a zombie's environment cannot be read, and a watch that misses a rank stays silent)."""
    if "RANK" in os.environ:
        pytest.skip("this process has RANK set: a child's environment before its exec would show it")
    reap_zombie_children()  # a stray orphan an earlier test left to this subreaper would be watched too
    # The test session's shared servers (the Slurm cluster's daemons, reparented to this subreaper) are this process's
    # children too: they are declared helpers, as the agent's own resource tracker and forkserver are, never workers.
    others = [child.pid for child in psutil.Process().children()]
    real_helpers = workers.helper_pids
    monkeypatch.setattr(workers, "helper_pids", lambda: [*real_helpers(), *others])
    reads: dict[int, int | None] = {}
    real = workers.worker_env

    def recording(pid: int, timeout: float = 5.0) -> dict[str, str] | None:
        env = real(pid, timeout)
        reads[pid] = None if env is None else int(env["RANK"])
        return env

    monkeypatch.setattr(workers, "worker_env", recording)
    return reads


# --- WorkerWatch ------------------------------------------------------------------------------------
@pytest.mark.proc  # starts processes
def test_the_watch_reports_every_exit_once_with_rank_and_status_and_leaves_the_status_to_popen(rank_reads):
    plan = {0: ("exit", 0), 1: ("exit", 7), 2: ("signal", signal.SIGTERM), 3: ("signal", signal.SIGKILL)}
    expected = {0: 0, 1: 7, 2: -signal.SIGTERM, 3: -signal.SIGKILL}
    calls: list[list[WorkerExit]] = []
    watch = WorkerWatch(len(plan), calls.append)
    children = {rank: start_child(rank, how, value) for rank, (how, value) in plan.items()}
    try:
        pids = {child.pid: rank for rank, child in children.items()}
        wait_until(lambda: set(rank_reads) >= set(pids), 20, message="the watch to read every child's RANK")
        assert rank_reads == pids

        for child in children.values():
            release(child)
        wait_until(lambda: calls, 20, message="the watch's callback")
        # The watch only looked (WNOWAIT): each child's Popen still collects its true status.
        statuses = {rank: child.wait(10) for rank, child in children.items()}
    finally:
        watch.stop()
        clean_up(children.values())

    assert len(calls) == 1, calls
    exits = calls[0]
    assert sorted((e.rank, e.returncode, e.pid) for e in exits) == [(r, expected[r], children[r].pid)
                                                                    for r in sorted(plan)]
    assert [e.at for e in exits] == sorted(e.at for e in exits), "exits are reported in the order they were seen"
    assert statuses == expected
    assert {pid: watch.exit_time(pid) for pid in pids} == {e.pid: e.at for e in exits}
    assert watch.exit_time(-1) is None


@pytest.mark.proc  # starts processes
def test_the_watch_waits_for_all_workers_and_reports_them_in_the_order_they_exited(rank_reads):
    calls: list[list[WorkerExit]] = []
    watch = WorkerWatch(3, calls.append)
    children = [start_child(rank, "exit", 10 + rank) for rank in (0, 1, 2)]
    try:
        wait_until(lambda: len(rank_reads) == 3, 20, message="the watch to read every child's RANK")
        order = [children[2], children[0], children[1]]
        for index, child in enumerate(order):
            release(child)
            wait_until(lambda: child.pid in watch.exits, 20, message=f"the watch to see pid {child.pid} exit")
            assert is_zombie(child.pid), "seen without being reaped"
            if index < len(order) - 1:
                assert calls == [], "the callback came before every worker had exited"
        wait_until(lambda: calls, 20, message="the watch's callback")
        statuses = [child.wait(10) for child in children]
    finally:
        watch.stop()
        clean_up(children)

    assert [(e.rank, e.returncode) for e in calls[0]] == [(2, 12), (0, 10), (1, 11)]
    assert statuses == [10, 11, 12]
    assert len(calls) == 1


# --- returncode_of and rank_of ---------------------------------------------------------------------
@pytest.mark.parametrize("how, value, expected", [
    ("exit", 0, 0),
    ("exit", 5, 5),
    ("exit", 255, 255),
    ("signal", signal.SIGTERM, -signal.SIGTERM),
    ("signal", signal.SIGKILL, -signal.SIGKILL),
], ids=["exit0", "exit5", "exit255", "SIGTERM", "SIGKILL"])
@pytest.mark.proc  # starts processes
def test_returncode_of_a_real_waitid_result_is_popen_style(how, value, expected):
    child = start_child(None, how, value)
    try:
        release(child)
        result = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        code = returncode_of(result)
        status = child.wait(10)
    finally:
        clean_up([child])

    assert code == expected == status
    assert result.si_code == (os.CLD_EXITED if how == "exit" else os.CLD_KILLED)


def test_returncode_of_a_core_dump_is_the_negative_signal():
    dumped = os.waitid_result((4242, os.getuid(), signal.SIGCHLD, signal.SIGSEGV, os.CLD_DUMPED))

    assert returncode_of(dumped) == -signal.SIGSEGV


@pytest.mark.proc  # starts processes
def test_rank_of_reads_rank_from_the_workers_environment():
    child = start_child(5)
    try:
        rank = rank_of(child.pid)
        release(child)
        child.wait(10)
    finally:
        clean_up([child])

    assert rank == 5


@pytest.mark.parametrize("rank", [None, "x", ""], ids=["no RANK", "RANK not a number", "RANK empty"])
@pytest.mark.proc  # starts processes
def test_rank_of_a_process_without_a_numeric_rank_is_none_after_its_timeout(rank):
    child = start_child(rank)
    try:
        wait_until(lambda: psutil.Process(child.pid).cmdline()[1:3] == ["-c", CHILD], 10, message="the child's exec")
        began = time.monotonic()
        found = rank_of(child.pid, timeout=0.3)
        took = time.monotonic() - began
        release(child)
        child.wait(10)
    finally:
        clean_up([child])

    assert found is None
    assert took >= 0.3


@pytest.mark.proc  # starts processes
def test_rank_of_a_process_that_is_gone_is_none_at_once():
    child = start_child(3)
    release(child)
    child.wait(10)

    began = time.monotonic()
    found = rank_of(child.pid, timeout=5.0)

    assert found is None
    assert time.monotonic() - began < 2.0, "it waited for a rank a gone process can never show"


# --- warm workers: found by their records ----------------------------------------------------------
@pytest.mark.proc  # starts processes
def test_a_warm_worker_killed_before_writing_its_end_still_has_its_exit_moment_and_leaves_the_status_to_torch(tmp_path):
    """A SIGKILLed warm worker writes no end to its record: its status comes from torch, whose failure times are whole
    seconds. The watch still knows to the millisecond when it died, so the root cause can be ordered right."""
    records = tmp_path / "workers"
    records.mkdir()
    calls: list[list[WorkerExit]] = []
    killed, ended = start_child(None, "signal", signal.SIGKILL), start_child(None, "exit", 1)
    watch = WorkerWatch(2, calls.append, parent=os.getpid(), records=str(records))
    try:
        for rank, child in enumerate((killed, ended)):
            (records / f"{child.pid}.json").write_text(json.dumps({"rank": rank, "local_rank": rank}))
        wait_until(lambda: watch.ranks == {killed.pid: 0, ended.pid: 1}, 20, message="the watch to read both records")
        release(killed)
        wait_until(lambda: watch.exit_time(killed.pid) is not None, 20, message="the killed worker's exit to be seen")
        (records / f"{ended.pid}.json").write_text(json.dumps({"rank": 1, "local_rank": 1, "exit": 1}))  # its last act
        release(ended)
        assert ended.wait(10) == 1
        wait_until(lambda: ended.pid in watch.exits, 20, message="the ended worker's exit to be seen")
        assert killed.wait(10) == -signal.SIGKILL
    finally:
        watch.stop()
        clean_up([killed, ended])

    assert killed.pid not in watch.exits and calls == [], "without its status the watch leaves the report to torch"
    assert watch.exit_time(killed.pid) < watch.exit_time(ended.pid)
    assert watch.exits[ended.pid].returncode == 1 and watch.exits[ended.pid].rank == 1


@pytest.mark.proc  # starts processes
def test_a_killed_warm_workers_status_comes_from_what_the_forkserver_recorded_as_it_reaped_it(tmp_path):
    """With the server's exit statuses (server_hooks.record_exits), the watch names a killed warm worker's signal and
    reports every exit itself, in the order they were seen: the root cause does not depend on torch."""
    records, exits = tmp_path / "workers", tmp_path / "exits"
    records.mkdir()
    exits.mkdir()
    calls: list[list[WorkerExit]] = []
    killed, ended = start_child(None, "signal", signal.SIGKILL), start_child(None, "exit", 1)
    (exits / str(killed.pid)).write_text("-15")  # an earlier worker's, under a pid reused: forgotten once it runs
    watch = WorkerWatch(2, calls.append, parent=os.getpid(), records=str(records), exits=str(exits))
    try:
        for rank, child in enumerate((killed, ended)):
            (records / f"{child.pid}.json").write_text(json.dumps({"rank": rank, "local_rank": rank}))
        wait_until(lambda: watch.ranks == {killed.pid: 0, ended.pid: 1}, 20, message="the watch to read both records")
        wait_until(lambda: not (exits / str(killed.pid)).exists(), 20, message="the stale status to be forgotten")
        release(killed)
        status = killed.wait(10)  # this test stands in for the server: it reaps and records
        (exits / str(killed.pid)).write_text(str(status))
        wait_until(lambda: killed.pid in watch.exits, 20, message="the killed worker's exit with its status")
        (records / f"{ended.pid}.json").write_text(json.dumps({"rank": 1, "local_rank": 1, "exit": 1}))
        release(ended)
        assert ended.wait(10) == 1
        wait_until(lambda: calls, 20, message="the watch's callback")
    finally:
        watch.stop()
        clean_up([killed, ended])

    assert [(e.rank, e.returncode) for e in calls[0]] == [(0, -signal.SIGKILL), (1, 1)]


@pytest.mark.proc  # starts processes
def test_the_forkserver_records_each_reaped_childs_status(tmp_path):
    """server_hooks.record_exits in a process of its own: os.waitpid, as multiprocessing's forkserver loop calls it,
    writes EXITS/<pid> for a child that was killed and for one that exited."""
    script = (
        "import os, signal, sys\n"
        "from pai_launch.forkserver import server_hooks as forkprep\n"
        f"forkprep.record_exits({str(tmp_path)!r})\n"
        "pids = []\n"
        "for how in ('kill', 'exit'):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os.kill(os.getpid(), signal.SIGKILL) if how == 'kill' else os._exit(7)\n"
        "    pids.append(pid)\n"
        "for pid in pids:\n"
        "    os.waitpid(pid, 0)\n"
        "assert os.waitpid is not forkprep.REAL_WAITPID\n"
        "print(*pids)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    killed, exited = done.stdout.split()
    assert (tmp_path / killed).read_text() == str(-signal.SIGKILL)
    assert (tmp_path / exited).read_text() == "7"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([killed, exited]), "no temp file left"
