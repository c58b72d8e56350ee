"""Faults of pai-launch's own machinery, end to end on the fake trainer: an agent that stops answering (SIGSTOP) is
replaced without --stall-timeout; pai-launch itself paused longer than --stall-timeout declares no false stall; a
forkserver killed mid-generation is named and replaced; a stop while the agent starts up starts no worker."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import pid_is_live, wait_until
from tests.proc.launch_files import generations, wait_event

pytestmark = pytest.mark.timeout(150)

HOOKS = Path(__file__).with_name("preload_hooks")
#: The hung-agent bound for these tests (PAI_LAUNCH_TEST_AGENT_SILENCE); pai-launch's own is 30 s.
SILENCE_S = 8.0


def test_a_sigstopped_agent_is_found_hung_killed_and_replaced_and_the_run_completes(scene, tmp_path):
    launch = scene.start("--nproc", "2", "--backoff", "0.2", env={"PAI_LAUNCH_TEST_AGENT_SILENCE": str(SILENCE_S)},
                         script_args=["--generations", "2", "--hang-generation", "1"])
    workers = {pid for pid, _ in scene.wait_ready(1, 2).values()}
    agent = psutil.Process(wait_event(launch, "generation_started", 30)["agent_pid"])
    stopped = time.monotonic()
    agent.send_signal(signal.SIGSTOP)
    rc = launch.wait(120)

    assert rc == 0, launch.log_summary()
    hung = launch.event("agent_hung")
    assert hung["generation"] == 1 and hung["agent_pid"] == agent.pid and hung["silent_s"] >= SILENCE_S
    assert "stopped answering" in hung["reason"]
    failed = launch.event("generation_failed")
    assert failed["generation"] == 1 and failed["error"].startswith("pai-launch's agent stopped answering"), failed
    retry = launch.event("retry_scheduled")
    assert retry["failures"] == 1 and "stopped answering" in retry["reason"]
    started = launch.events("generation_started")
    assert [e["generation"] for e in started] == [1, 2] and started[1]["agent_pid"] != agent.pid
    assert generations(launch) == [(1, None), (2, None)]
    # Found within the bound plus the heartbeat's period and a loaded machine's slack, well inside a minute.
    assert time.monotonic() - stopped < 60
    assert not pid_is_live(agent.pid) and not [pid for pid in workers if pid_is_live(pid)]
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]


def test_pai_launch_paused_longer_than_the_stall_timeout_declares_no_false_stall(scene):
    # Rank 0 writes latest.pt every 0.3 s for 20 s; pai-launch is stopped for twice --stall-timeout meanwhile (and
    # longer than the hung-agent bound set here).
    stall_s, pause_s = 3.0, 7.0
    launch = scene.start("--nproc", "2", "--stall-timeout", str(stall_s),
                         env={"PAI_LAUNCH_TEST_AGENT_SILENCE": "5"},
                         script_args=["--heartbeat", "0.3", "--train-seconds", "20", "--generations", "1"])
    scene.wait_ready(1, 2)
    latest = scene.work / "PAI" / "latest.pt"
    wait_until(latest.exists, 30, message="rank 0's first latest.pt")
    paused_at = time.time()
    launch.popen.send_signal(signal.SIGSTOP)
    try:
        # The workers go on writing while pai-launch sees nothing: wait until they have for pause_s.
        wait_until(lambda: latest.stat().st_mtime >= paused_at + pause_s, 30, message="writes during the pause")
    finally:
        launch.popen.send_signal(signal.SIGCONT)
    rc = launch.wait(90)

    assert rc == 0, launch.log_summary()
    resumed = launch.event("supervisor_resumed")
    assert resumed["paused_s"] >= pause_s - 0.5 and resumed["phase"] == "training"
    assert resumed["last_write_s_ago"] is not None and resumed["last_write_s_ago"] < stall_s, resumed
    assert "stall_detected" not in launch.event_names() and "agent_hung" not in launch.event_names()
    assert "signal_forwarded" not in launch.event_names() and scene.signals() == {}
    assert [(e["generation"], e["complete"]) for e in launch.events("generation_ended")] == [(1, True)]


def test_a_forkserver_killed_mid_generation_is_named_and_the_next_generation_gets_a_new_one(scene):
    launch = scene.start("--nproc", "2", "--backoff", "0.2",
                         script_args=["--generations", "2", "--hang-generation", "1"])
    scene.wait_ready(1, 2)
    ready = wait_event(launch, "agent_ready", 30)
    psutil.Process(ready["forkserver_pid"]).send_signal(signal.SIGKILL)
    rc = launch.wait(90)

    assert rc == 0, launch.log_summary()
    failed = launch.event("generation_failed")
    assert failed["generation"] == 1, failed
    assert failed["error"].startswith(f"the warm workers' forkserver (pid {ready['forkserver_pid']}) died during "
                                      "generation 1"), failed
    # pai-launch's own lines name the forkserver, not the exits its death caused (torch's own lines may).
    assert "rank" not in failed and not [e for e in launch.events() if "exit code 255" in json.dumps(e)]
    assert "forkserver" in launch.event("retry_scheduled")["reason"]
    restarted = launch.event("forkserver_restarted")
    assert restarted["agent_pid"] == ready["agent_pid"] and restarted["forkserver_pid"] != ready["forkserver_pid"]
    assert [(e["generation"], e["complete"]) for e in launch.events("generation_ended")] == [(2, True)]


def test_a_stop_while_the_agent_starts_up_starts_no_worker(scene):
    # The agent's forkserver preloads a module that waits for a file: the agent is not ready while the test acts.
    release = scene.io / "release-preload"
    env = {"PYTHONPATH": os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "PAI_TEST_RELEASE_PRELOAD": str(release)}
    launch = scene.start("--nproc", "2", "--grace", "30", "--preload", "torch,torch.distributed,holds_start_up",
                         env=env, script_args=["--generations", "1"])
    wait_event(launch, "generation_started", 60)
    assert "agent_ready" not in launch.event_names()
    launch.send(signal.SIGTERM)
    release.touch()  # the agent becomes ready now: it must not start the generation it was to run
    rc = launch.wait(60)

    assert rc == 143, launch.log_summary()
    skipped = launch.event("workers_not_started")
    assert skipped["generation"] == 1
    assert launch.event("run_finished")["stopped_by"] == "SIGTERM"
    assert scene.ready(1) == {} and not list(scene.ready_dir.glob("1-*"))
    # Nothing ran generation 1's script: no record of it, no worker's log line.
    assert not [path.name for path in scene.record_dir.iterdir() if path.name.startswith("1-")]
    assert "[rank" not in launch.stdout


def test_an_agent_whose_import_torch_hangs_is_reported_and_a_stop_still_ends_everything(scene, tmp_path):
    """A `torch` that never finishes importing (a hung network file system): the run says what it waits for, and at
    each doubling; SIGTERM still ends it with nothing left."""
    hanging = tmp_path / "hanging-torch" / "torch"
    hanging.mkdir(parents=True)
    (hanging / "__init__.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    # Ahead of the inherited path, not instead of it: the copy of pai_launch under test stays the one that runs.
    env = {"PYTHONPATH": os.pathsep.join([str(hanging.parent), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "PAI_LAUNCH_TEST_AGENT_SLOW_START": "1"}
    launch = scene.start("--nproc", "1", env=env, script_args=["--generations", "1"])
    first = wait_event(launch, "agent_slow_start", 30)
    assert first["waited_s"] >= 1 and "import" in first["hint"] and "py-spy dump" in first["hint"]
    second = wait_event(launch, "agent_slow_start", 30, count=2)
    assert second["agent_pid"] == first["agent_pid"] and second["waited_s"] >= 2 * first["waited_s"] - 0.5
    assert "agent_ready" not in launch.event_names()
    launch.send(signal.SIGTERM)
    assert launch.wait(60) == 143, launch.log_summary()
    assert not pid_is_live(first["agent_pid"])
