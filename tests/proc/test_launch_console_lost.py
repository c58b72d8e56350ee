"""pai-launch's own console may be closed at start, or go away mid-run (a reader that quits, a full device, a terminal
that is closed): the run and its workers go on, the events file keeps every event and says once that the console was
lost. A SIGHUP after the terminal is gone, and a SIGQUIT, stop the run as the manual says (docs/users/usage.md); the
exit-code boundary
says 70 even when it can write nothing."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time

import psutil
import pytest

from tests.helpers import FAKE_TRAINER, PYTHON, Launch, assert_all_gone, is_live, launch_env, wait_until
from tests.proc.launch_files import read_events_file

pytestmark = pytest.mark.timeout(120)

FAULTY_LAUNCH = os.path.join(os.path.dirname(__file__), "faulty_launch.py")


def redirected(redirection: str) -> tuple[str, ...]:
    """A prefix that runs pai-launch (same pid: exec) with the shell's `redirection` applied, e.g. `>&-`."""
    return ("bash", "-c", f'exec "$@" {redirection}', "bash")


def saved(scene, name: str) -> list[dict]:
    return [event for event in read_events_file(scene.work / "PAI") if event["event"] == name]


def assert_completed(scene) -> None:
    finished = saved(scene, "run_finished")
    assert [event["exit_code"] for event in finished] == [0], read_events_file(scene.work / "PAI")[-5:]


@pytest.mark.parametrize("redirection", [">&-", "2>&-", "<&- >&- 2>&-", "2>/dev/full", ">/dev/full"])
def test_a_console_closed_or_full_from_the_start_never_ends_the_run(scene, redirection):
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "2"], prefix=redirected(redirection))

    assert rc == 0, (launch.stderr[-3000:], read_events_file(scene.work / "PAI")[-5:])
    assert_completed(scene)
    assert len({record["env"]["PAI_LAUNCH_GENERATION"] for record in scene.records()}) == 3  # init, 1, 2
    assert not saved(scene, "internal_error")
    if redirection == "2>/dev/full":
        lost = saved(scene, "console_lost")
        assert [event["stream"] for event in lost] == ["stderr"] and "No space left" in lost[0]["error"], lost
    if redirection == ">&-":
        assert launch.event("run_finished")["exit_code"] == 0  # stderr still works and carries the log
    if redirection == "2>&-":
        assert "[rank0]: rank 0 generation 2" in launch.stdout  # stdout still carries the workers' lines


def test_a_log_pipe_whose_reader_quits_after_one_line_leaves_the_run_to_complete(scene):
    read_end, write_end = os.pipe()
    out = scene.io / "pipe.stdout"
    with open(out, "wb") as stdout:
        popen = subprocess.Popen(
            [PYTHON, "-m", "pai_launch", "--log-format", "json", "--nproc", "2", str(FAKE_TRAINER),
             *scene.instrumentation, "--generations", "2"],
            cwd=scene.work, env=launch_env(scene.root), stdin=subprocess.DEVNULL, stdout=stdout, stderr=write_end)
    os.close(write_end)
    launch = Launch(popen, out, scene.io / "pipe.stderr")
    launch.stderr_path.write_text("")
    scene.launches.append(launch)
    with os.fdopen(read_end, "rb") as reader:  # `2>&1 | head -1`: one line, then the reader is gone
        first = reader.readline()
    assert first.startswith(b"{")

    rc = launch.wait(90)

    assert rc == 0, read_events_file(scene.work / "PAI")[-5:]
    assert_completed(scene)
    lost = saved(scene, "console_lost")
    assert [event["stream"] for event in lost] == ["stderr"] and lost[0]["error"].startswith("BrokenPipeError"), lost
    assert not saved(scene, "internal_error")


def test_a_terminal_closed_mid_run_then_sighup_forwards_with_grace_and_exits_129(scene):
    grace = 20.0
    primary, secondary = pty.openpty()
    popen = subprocess.Popen(
        [PYTHON, "-m", "pai_launch", "--nproc", "2", "--grace", str(grace), str(FAKE_TRAINER), *scene.instrumentation,
         "--hang", "--spawn-grandchild"],
        cwd=scene.work, env=launch_env(scene.root, {"COLUMNS": "200"}), stdin=subprocess.DEVNULL, stdout=secondary,
        stderr=secondary)
    os.close(secondary)
    launch = Launch(popen, scene.io / "tty.stdout", scene.io / "tty.stderr")
    scene.launches.append(launch)
    shown = []

    def drained_until_ready():
        while select.select([primary], [], [], 0)[0]:
            shown.append(os.read(primary, 65536))
        return scene.ready(1) if len(scene.ready(1)) == 2 else None

    ready = wait_until(drained_until_ready, 60, message="generation 1's two workers")
    assert b"generation_started" in b"".join(shown)  # console lines on the terminal, its live line too
    os.close(primary)  # the terminal is gone: every write to it now fails with EIO
    lost = wait_until(lambda: saved(scene, "console_lost"), 30, message="console_lost in the events file")
    assert "Input/output error" in lost[0]["error"], lost
    grandchildren = [psutil.Process(sleeper) for _, sleeper in ready.values()]

    sent = launch.send(signal.SIGHUP)
    rc = launch.wait(60)

    assert rc == 129, read_events_file(scene.work / "PAI")[-8:]
    assert launch.ended - sent < grace, "the workers stopped when asked: no wait for the grace period"
    names = [event["event"] for event in read_events_file(scene.work / "PAI")]
    assert {"signal_received", "signal_forwarded", "generation_stopped"} <= set(names) and "run_killed" not in names
    assert "internal_error" not in names
    seen = scene.signals()
    assert sorted(seen) == [0, 1] and all(got[0] == "SIGHUP" for got in seen.values()), seen
    finished = saved(scene, "run_finished")[0]
    assert (finished["exit_code"], finished["stopped_by"]) == (129, "SIGHUP")
    assert not [proc.pid for proc in grandchildren if is_live(proc)]


def test_sigquit_mid_generation_dumps_the_stacks_then_stops_like_sigterm_and_exits_131(scene, tmp_path):
    grace = 20.0
    launch = scene.start("--nproc", "2", "--grace", str(grace), script_args=["--hang", "--spawn-grandchild"])
    ready = scene.wait_ready(1, 2)
    processes = [psutil.Process(pid) for pair in ready.values() for pid in pair if pid]

    sent = launch.send(signal.SIGQUIT)
    rc = launch.wait(60)

    assert rc == 131, launch.log_summary()
    assert launch.ended - sent < grace
    dump = launch.event("stack_dump")
    assert dump["pid"] == launch.pid and "thread MainThread" in dump["stacks"] and "next_event" in dump["stacks"]
    assert saved(scene, "stack_dump")[0]["stacks"] == dump["stacks"]
    seen = scene.signals()
    assert sorted(seen) == [0, 1] and all(got[0] == "SIGTERM" for got in seen.values()), seen
    assert "run_killed" not in launch.event_names()
    finished = launch.event("run_finished")
    assert (finished["exit_code"], finished["stopped_by"], finished["reason"]) == (131, "SIGQUIT", "stopped by SIGQUIT")
    assert_all_gone(processes, within=2.0, since=launch.ended, mentioning=str(tmp_path))


def test_a_bug_before_anything_started_exits_70_with_stderr_unwritable(scene):
    launch = scene.start("--nproc", "2", entry=(FAULTY_LAUNCH,), env={"PAI_TEST_FAULT": "session-open"},
                         prefix=redirected("2>/dev/full"))

    assert launch.wait(30) == 70
    assert scene.records() == []  # nothing was started


def test_a_bug_mid_run_exits_70_with_stderr_unwritable_and_the_events_file_says_why(scene, tmp_path):
    launch = scene.start("--nproc", "2", "--grace", "30", entry=(FAULTY_LAUNCH,),
                         env={"PAI_TEST_FAULT": "record-while-training"}, prefix=redirected("2>/dev/full"),
                         script_args=["--hang-generation", "2", "--heartbeat", "0.2", "--spawn-grandchild"])

    assert launch.wait(60) == 70, read_events_file(scene.work / "PAI")[-5:]
    ended = time.monotonic()
    errors = saved(scene, "internal_error")
    assert len(errors) == 1 and "injected fault in record" in errors[0]["error"], errors
    assert saved(scene, "console_lost")[0]["stream"] == "stderr"
    assert_all_gone([], within=2.0, since=ended, mentioning=str(tmp_path), what="processes of the run after exit 70")
