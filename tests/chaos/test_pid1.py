"""pai-launch as a container's CMD: PID 1 of a new PID namespace (`unshare --pid --fork --mount-proc`), no tini.

As PID 1 it must reap every zombie re-parented to it without stealing its own children's exit statuses,
handle SIGTERM from the moment its handlers are installed (the kernel drops a signal PID 1 has no
handler for), and exit within --grace + 2 s. unshare does not forward signals: they go to its child,
pai-launch, by its host pid. The namespace's pids are read through /proc/<pai-launch>/root/proc.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.chaos.chaos_scenarios import (
    EXAMPLE,
    FAKE,
    GONE_WITHIN_S,
    NPROC,
    ORPHANING_TRAINER,
    PidOneLaunch,
    Run,
    events,
    finished,
    pid_namespace,
    processes_in_namespace,
    sigterm_caught,
)
from tests.helpers import describe, wait_until, wait_until_empty

pytestmark = [
    pytest.mark.proc,
    pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                       reason="needs util-linux unshare and root for a new PID namespace"),
]


@pytest.fixture
def run(tmp_path):
    """A chaos Run in tmp_path; at the end nothing may be left running and no file may be lost."""
    chaos_run = Run(tmp_path, FAKE, timeout=240)
    yield chaos_run
    left, lost = chaos_run.close()
    assert not left, f"processes left: {left}"
    assert not lost, f"files lost: {lost}"
    assert not chaos_run.problems, chaos_run.problems


def start_pid1(run: Run, *pai_args: str, script: Path = ORPHANING_TRAINER, script_args=(), env=None) -> PidOneLaunch:
    launch = run.start(*pai_args, script=script, script_args=list(script_args), pid1=True, env=env)
    assert isinstance(launch, PidOneLaunch)
    return launch


def fake_args(run: Run, *extra: str, orphans: int = 0) -> list[str]:
    own = ["--orphans", str(orphans), "--orphan-dir", str(run.io / "orphans")] if orphans else []
    return [*own, "--ready-dir", str(run.ready_dir), "--signal-log", str(run.signal_log), *extra]


def orphan_records(run: Run) -> list[dict]:
    folder = run.io / "orphans"
    if not folder.is_dir():
        return []
    return [json.loads(path.read_text()) for path in folder.iterdir() if not path.name.startswith(".")]


def state_in(proc_dir: Path, pid: int) -> str | None:
    """A namespace pid's state letter (Z for a zombie), None once it is reaped."""
    try:
        for line in (proc_dir / str(pid) / "status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        return None
    return None


@pytest.mark.timeout(90)
def test_full_run_as_pid1_completes_and_reports_the_real_exit_codes(run):
    launch = start_pid1(run, "--nproc", NPROC, "--backoff", "0.2",
                        script_args=fake_args(run, "--fail-rank", "1", "--fail-generation", "2", "--fail-code", "7",
                                              "--heartbeat", "0.1", "--train-seconds", "0.3", orphans=2))
    rc = run.finish(launch, timeout=80)

    assert rc == 0, launch.log_summary()
    assert events(launch, "run_started")[0]["pid"] == 1
    assert [e["exit"] for e in events(launch, "init_exited")] == ["exit code 0"]
    failed = events(launch, "generation_failed")
    assert [(e["generation"], e["rank"], e["exit"]) for e in failed] == [(2, 1, "exit code 7")], launch.log_summary()
    assert "rank 1 failing on purpose with 7" in events(launch, "worker_log_tail")[0]["tail"]
    ended = events(launch, "generation_ended")
    assert [e["generation"] for e in ended] == [1, 3] and all(e["exit"] == "all workers exited 0" for e in ended)
    # Every generation's workers left orphans, and they all went to PID 1, pai-launch.
    records = orphan_records(run)
    assert len(records) == 2 * 2 * 3 and {r["ppid"] for r in records} == {1}, records


@pytest.mark.timeout(60)
def test_init_run_exit_code_survives_reaping_as_pid1(run):
    launch = start_pid1(run, "--nproc", NPROC, script_args=fake_args(run, "--fail-init", "5"))
    rc = run.finish(launch, timeout=50)

    assert rc == 3, launch.log_summary()
    assert [e["exit"] for e in events(launch, "init_exited")] == ["exit code 5"]
    assert finished(launch)["reason"] == "init run failed with exit code 5"


@pytest.mark.timeout(90)
def test_zombies_adopted_by_pid1_are_reaped_while_training_runs(run):
    launch = start_pid1(run, "--nproc", NPROC,
                        script_args=fake_args(run, "--hold-until", str(run.hold_file), orphans=3))
    records = run.wait(launch, lambda: (lambda r: r if len(r) >= 6 else None)(orphan_records(run)), "6 orphans to exit")
    assert {r["ppid"] for r in records} == {1}, f"orphans were not re-parented to PID 1: {records}"
    proc_dir = launch.namespace_proc()
    namespace_pids = [r["pid"] for r in records]

    # Each orphan exited right after writing its record: a zombie under PID 1 until pai-launch reaps it.
    def unreaped() -> list[tuple[int, str | None]]:
        return [(pid, state_in(proc_dir, pid)) for pid in namespace_pids if state_in(proc_dir, pid) is not None]

    left = wait_until_empty(unreaped, GONE_WITHIN_S)
    assert not left, f"zombies still waiting for PID 1 to reap them: {left}"
    assert launch.popen.poll() is None, "reaped only because pai-launch exited"
    zombies = [pid for pid in (int(n) for n in os.listdir(proc_dir) if n.isdigit()) if state_in(proc_dir, pid) == "Z"]
    assert len(zombies) <= 1, f"zombies in the namespace while training runs: {zombies}"  # at most one being reaped now

    run.hold_file.touch()
    rc = run.finish(launch, timeout=60)
    assert rc == 0, launch.log_summary()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", ["exit on SIGTERM", "ignore SIGTERM"])
def test_sigterm_to_pid1_mid_generation_exits_143_within_grace_and_leaves_nothing(run, workers):
    grace = 3
    extra = ["--hang", "--spawn-grandchild"] + (["--ignore-sigterm"] if workers == "ignore SIGTERM" else [])
    launch = start_pid1(run, "--nproc", NPROC, "--grace", str(grace), script_args=fake_args(run, *extra, orphans=1))
    run.wait(launch, lambda: len(run.ready(1)) >= 2, "both workers of generation 1")
    namespace = pid_namespace(launch.pai_pid())
    assert len(processes_in_namespace(namespace)) >= 6  # pai-launch, agent (+ forkserver), 2 workers, 2 sleepers

    sent = launch.send(signal.SIGTERM)
    rc = run.finish(launch, timeout=grace + 10)
    took = time.monotonic() - sent

    assert rc == 143, launch.log_summary()
    assert took < grace + 2, f"{took:.1f} s with --grace {grace}"
    if workers == "ignore SIGTERM":
        assert took >= grace and events(launch, "run_killed")
    assert finished(launch)["reason"] == "stopped by SIGTERM"
    assert run.signals() == {0: ["SIGTERM"], 1: ["SIGTERM"]}
    left = wait_until_empty(lambda: processes_in_namespace(namespace), GONE_WITHIN_S)
    assert not left, [describe(p) for p in left]


@pytest.mark.timeout(60)
def test_sigterm_right_after_the_handlers_are_installed_stops_the_run(run):
    grace = 5
    started = time.monotonic()
    launch = start_pid1(run, "--nproc", NPROC, "--grace", str(grace), script_args=fake_args(run, "--hang"))
    pai_pid = launch.pai_pid()
    wait_until(lambda: sigterm_caught(pai_pid), 10, interval=0.001, message="pai-launch's SIGTERM handler")
    handler_after = time.monotonic() - started
    sent = launch.send(signal.SIGTERM)
    rc = run.finish(launch, timeout=grace + 10)
    took = time.monotonic() - sent

    assert rc == 143, launch.log_summary()
    assert took < grace + 2
    # Installed first thing, before typer, watchdog and the rest are imported (a second is far more than that).
    assert handler_after < 1.0, f"the SIGTERM handler came {handler_after:.2f} s after the start"
    assert not events(launch, "generation_started"), "training started although SIGTERM came first"
    # Before the loop began ("... before anything was started") or during the init run: either way, a stop.
    assert finished(launch)["reason"].startswith("stopped by SIGTERM")


@pytest.mark.timeout(60)
def test_sigterm_storm_from_the_first_instant_is_not_lost(run):
    """SIGTERM every 5 ms from before pai-launch's interpreter has started: those sent before the handler
    exists are dropped by the kernel (PID 1), the first one after it stops the run; it never needs SIGKILL."""
    grace = 5
    launch = start_pid1(run, "--nproc", NPROC, "--grace", str(grace), script_args=fake_args(run, "--hang"))
    pai_pid = launch.pai_pid(timeout=10)
    first = time.monotonic()
    while launch.popen.poll() is None and time.monotonic() - first < grace + 2:
        try:
            os.kill(pai_pid, signal.SIGTERM)
        except ProcessLookupError:
            break
        time.sleep(0.005)
    rc = run.finish(launch, timeout=grace + 10)
    took = time.monotonic() - first

    assert rc == 143, launch.log_summary()
    assert took < grace + 2


@pytest.mark.torch
@pytest.mark.timeout(240)
def test_real_perforatedai_example_runs_to_completion_as_pid1(tmp_path):
    chaos_run = Run(tmp_path, "real", timeout=220)
    try:
        launch = chaos_run.start("--nproc", NPROC, script=EXAMPLE, pid1=True)
        rc = chaos_run.finish(launch)
    finally:
        left, lost = chaos_run.close()
    assert rc == 0, launch.log_summary()
    assert events(launch, "run_started")[0]["pid"] == 1
    assert len(events(launch, "generation_started")) >= 3 and len(events(launch, "dendrites_added")) >= 2
    assert (chaos_run.save / ".training_complete").is_file()
    assert not left and not lost and not chaos_run.problems, (left, lost, chaos_run.problems)
