"""The exit-code boundary, shown by injecting bugs into a real pai-launch (tests/proc/faulty_launch.py).

Whatever raises inside pai-launch, the user gets exit code 70, one log event naming the error with its
traceback (in the log and in SAVE/.pai-launch/events.jsonl), every process of the run stopped and swept,
and never a bare Python traceback as the only explanation.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import Launch, assert_all_gone
from tests.proc.launch_files import read_events_file, read_state

pytestmark = pytest.mark.timeout(90)

FAULTY_LAUNCH = Path(__file__).with_name("faulty_launch.py")
INTERNAL_ERROR = 70


def start_faulty(scene, fault: str, *pai_args: str, script_args=()) -> Launch:
    """scene.start through faulty_launch.py, with PAI_TEST_FAULT=fault."""
    return scene.start(*pai_args, script_args=script_args, entry=(str(FAULTY_LAUNCH),), env={"PAI_TEST_FAULT": fault})


def saved_events(scene, name: str) -> list[dict]:
    return read_events_file(scene.work / "PAI", name)


def assert_reported_once(launch: Launch, where: str) -> dict:
    event = launch.event("internal_error")
    assert event["exit_code"] == INTERNAL_ERROR and f"injected fault in {where}" in event["error"]
    assert "Traceback" in event["exception"] and "RuntimeError: injected fault" in event["exception"]
    assert "bug in pai-launch" in event["hint"]
    # No bare traceback: every line pai-launch wrote to stderr is one of its JSON events or a worker's line.
    stray = [line for line in launch.stderr.splitlines() if line and not line.startswith(("{", "[rank"))]
    assert stray == [], stray
    return event


def test_a_bug_mid_generation_stops_and_sweeps_every_worker_and_exits_70(scene, tmp_path):
    launch = start_faulty(scene, "record-while-training", "--nproc", "2", "--grace", "30",
                          script_args=["--hang-generation", "2", "--heartbeat", "0.2", "--spawn-grandchild"])
    rc = launch.wait(45)
    ended = time.monotonic()
    assert rc == INTERNAL_ERROR, launch.log_summary()
    assert_reported_once(launch, "record")
    assert "injected fault in record" in saved_events(scene, "internal_error")[0]["exception"]
    workers = scene.ready(2)
    assert len(workers) == 2, workers  # the bug hit while generation 2's workers (and their sleepers) ran
    pids = [pid for pid, _ in workers.values()] + [sleeper for _, sleeper in workers.values() if sleeper]
    assert_all_gone([psutil.Process(pid) for pid in pids if psutil.pid_exists(pid)], within=2.0, since=ended,
                    mentioning=str(tmp_path), what="processes of the run after the internal error")
    assert not any(name.startswith("pai-launch-logs-") for name in scene.tmp_listing())


def test_a_crashed_thread_ends_the_run_as_an_internal_error_instead_of_a_hang(scene):
    launch = start_faulty(scene, "agent-result", "--nproc", "2", script_args=["--generations", "2"])
    rc = launch.wait(45)
    assert rc == INTERNAL_ERROR, launch.log_summary()
    event = assert_reported_once(launch, "the agent's result")
    assert "thread agent-" in event["error"]
    state = read_state(scene.work / "PAI")
    assert state["last_exit"]["code"] == INTERNAL_ERROR and "injected fault" in state["last_exit"]["reason"]


def test_a_crash_in_the_watchers_thread_is_reported_too(scene):
    launch = start_faulty(scene, "watcher", "--nproc", "2", script_args=["--generations", "2"])
    rc = launch.wait(45)
    assert rc == INTERNAL_ERROR, launch.log_summary()
    assert_reported_once(launch, "the watcher")
    assert saved_events(scene, "internal_error")


def test_a_bug_before_anything_started_is_one_line_and_exit_70(scene):
    launch = start_faulty(scene, "session-open", "--nproc", "2")
    rc = launch.wait(30)
    assert rc == INTERNAL_ERROR
    last = launch.stderr.strip().splitlines()[-1]
    assert last.startswith("pai-launch: error: internal error (RuntimeError: injected fault in opening the save "
                           "folder)")
    assert "exit code 70" in last
    assert scene.records() == []  # nothing was started
