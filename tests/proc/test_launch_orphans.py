"""No orphans: however pai-launch ends, every process of the run is gone.

The kill -9 tests snapshot pai-launch's descendants while it runs, then SIGKILL it: each of those
processes, and any process whose command line or working directory names the test's folder, must be gone
within 2 s. (pai-launch is a child subreaper, so once it is dead its orphans re-parent elsewhere: the check
does not rely on them being our descendants.)
"""

from __future__ import annotations

import signal
import time

import psutil
import pytest

from tests.helpers import assert_all_gone, is_live, pid_is_live, wait_until
from tests.proc.launch_files import wait_event

pytestmark = pytest.mark.timeout(60)

GONE_WITHIN_S = 2.0


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


@pytest.mark.parametrize("phase", ["init", "training"])
def test_kill_9_of_pai_launch_leaves_no_process_behind(scene, tmp_path, phase):
    script_args = ["--hang-init"] if phase == "init" else ["--hang", "--spawn-grandchild"]
    launch = scene.start("--nproc", "2", "--grace", "30", script_args=script_args)
    if phase == "init":
        scene.wait_ready(0, 1)
        expected = {scene.ready(0)[0][0]}
    else:
        ready = scene.wait_ready(1, 2)
        expected = {pid for pid, _ in ready.values()} | {gc for _, gc in ready.values()}
    # The ready files come from the processes themselves, so they are already descendants of pai-launch.
    snapshot = wait_until(lambda: (lambda d: d if expected <= {p.pid for p in d} else None)(_descendants(launch.pid)),
                          10,
                          message="the trainer processes to show up under pai-launch")
    if phase == "training":
        assert len(snapshot) >= 5, [p.pid for p in snapshot]  # agent, its forkserver, 2 workers, 2 sleepers

    killed = time.monotonic()
    launch.popen.send_signal(signal.SIGKILL)
    assert launch.wait(10) == -signal.SIGKILL

    assert_all_gone(snapshot, within=GONE_WITHIN_S, since=killed, mentioning=str(tmp_path),
                    what="processes of the run after kill -9 of pai-launch")


@pytest.mark.parametrize("link", ["agent_pid", "forkserver_pid"])
def test_kill_9_of_the_agent_or_its_forkserver_takes_the_warm_workers_with_it(scene, tmp_path, link):
    launch = scene.start("--nproc", "2", "--grace", "30", "--max-failures", "1", script_args=["--hang"])
    ready = scene.wait_ready(1, 2)
    target = psutil.Process(wait_event(launch, "agent_ready", 30)[link])
    workers = {pid for pid, _ in ready.values()}
    chain = [target, *target.children(recursive=True)]
    assert workers <= {proc.pid for proc in chain}, (link, [p.pid for p in chain])

    killed = time.monotonic()
    target.send_signal(signal.SIGKILL)
    # Every link below dies with its parent (parent-death signals): gone at once, not when pai-launch cleans up.
    assert_all_gone(chain, within=GONE_WITHIN_S, since=killed, what=f"the processes under the killed {link[:-4]}")
    assert launch.wait(30) == 4, launch.log_summary()
    launch.event("generation_failed")
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]


def test_a_forkserver_killed_between_generations_is_restarted_and_checked_again(scene):
    launch = scene.start("--nproc", "2", "--backoff", "0.2",
                         script_args=["--generations", "2", "--hang-generation", "1"])
    scene.wait_ready(1, 2)
    first = wait_event(launch, "agent_ready", 30)
    psutil.Process(first["forkserver_pid"]).send_signal(signal.SIGKILL)  # its workers die with it: generation 1 fails
    rc = launch.wait(60)

    assert rc == 0, launch.log_summary()
    restarted = launch.event("forkserver_restarted")
    assert restarted["agent_pid"] == first["agent_pid"] and restarted["forkserver_pid"] != first["forkserver_pid"]
    assert restarted["reason"] == "the forkserver had died", restarted
    assert [e["agent_pid"] for e in launch.events("generation_started")] == [first["agent_pid"]] * 2
    # torch learns a forked worker's status from its forkserver: with the server gone it says 255, so the failure
    # names the forkserver's death instead.
    assert "the warm workers' forkserver" in launch.event("generation_failed")["error"]


def test_grandchild_in_its_own_session_is_swept_when_the_run_completes(scene):
    launch = scene.start("--nproc", "2", script_args=["--generations", "1", "--spawn-grandchild",
                                                     "--hold-until", str(scene.hold_file)])
    ready = scene.wait_ready(1, 2)
    sleepers = [psutil.Process(gc) for _, gc in ready.values()]
    assert all(is_live(proc) for proc in sleepers)
    scene.hold_file.touch()
    rc = launch.wait(60)

    assert rc == 0, launch.log_summary()
    # Swept before pai-launch exited, not merely after: nothing to wait for here.
    assert not [proc.pid for proc in sleepers if is_live(proc)]
    assert launch.event("leftovers_killed")["processes"] >= 2


def test_grandchildren_are_swept_when_a_worker_fails(scene):
    # The same failure before training twice: retried once, then pai-launch exits with the worker's code.
    launch = scene.start("--nproc", "2", "--backoff", "0.2",
                         script_args=["--spawn-grandchild", "--fail-rank", "0", "--fail-code", "9", "--fail-every",
                                      "--hold-until", str(scene.hold_file)])
    ready = scene.wait_ready(1, 2)
    sleepers = [psutil.Process(gc) for _, gc in ready.values()]
    scene.hold_file.touch()
    rc = launch.wait(60)

    assert rc == 9, launch.log_summary()
    assert [e["generation"] for e in launch.events("generation_failed")] == [1, 2]
    assert not [proc.pid for proc in sleepers if is_live(proc)]
    # The second generation's sleepers: rank 0's at least (torch may stop rank 1 before its ready file; a sleeper
    # without one is still caught by the no_orphans check, which finds it by its command line).
    later = [gc for _, gc in scene.ready(2).values()]
    assert later and not [pid for pid in later if pid_is_live(pid)]


def test_kill_9_of_the_agent_is_retried_then_fails_the_run_with_1_and_leaves_no_process_behind(scene, tmp_path):
    # The agent dying before its workers reached training, the same way twice: "retrying cannot help", exit 1.
    launch = scene.start("--nproc", "2", "--grace", "30", "--backoff", "0.2",
                         script_args=["--hang", "--spawn-grandchild"])
    run = []
    for generation in (1, 2):
        ready = scene.wait_ready(generation, 2)
        started = wait_event(launch, "generation_started", 30, count=generation)
        agent = psutil.Process(started["agent_pid"])
        procs = [agent, *agent.children(recursive=True)]
        assert {pid for pid, _ in ready.values()} <= {p.pid for p in procs}
        run += procs + [psutil.Process(gc) for _, gc in ready.values()]  # alive: the agent still runs
        agent.kill()
    rc = launch.wait(30)

    assert rc == 1, launch.log_summary()
    failed = launch.events("generation_failed")
    assert [e["generation"] for e in failed] == [1, 2]
    assert all("agent process ended with signal SIGKILL" in e["error"] for e in failed)
    assert launch.event("retry_scheduled")["failures"] == 1
    assert "retrying cannot help" in launch.event("run_finished")["reason"]
    # pai-launch itself has exited: its workers died with the agent, the sleepers were swept.
    assert_all_gone(run, within=1.0, mentioning=str(tmp_path), what="processes of the run after kill -9 of the agent")
