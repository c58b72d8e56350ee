"""--stall-timeout end to end: no write to the save folder for that long while workers run is a hang:
stall_detected, SIGUSR1 to the workers (stack dumps), min(5, --grace) s later SIGTERM (then --grace, then
SIGKILL), and the generation counts as a failure that is retried. Writes keep a long generation alive."""

from __future__ import annotations

import pytest

from tests.helpers import stamp
from tests.proc.launch_files import generations

pytestmark = pytest.mark.timeout(90)

#: Long enough that a healthy generation on a loaded 2-core machine writes its first file well within it.
STALL_S = 3.0
GRACE_S = 1.5


def _signal_event(launch, name: str) -> dict:
    (event,) = [e for e in launch.events("signal_forwarded") if e["signal"] == name]
    return event


@pytest.mark.parametrize("workers", ["obey_sigterm", "ignore_sigterm"])
def test_a_hung_generation_gets_sigusr1_then_is_stopped_and_retried_to_completion(scene, workers):
    # Generation 1 hangs on every rank without writing anything (a deadlocked collective).
    extra = ["--ignore-sigterm"] if workers == "ignore_sigterm" else []
    launch, rc = scene.run("--nproc", "2", "--stall-timeout", str(STALL_S), "--grace", str(GRACE_S), "--backoff", "0.2",
                           script_args=["--hang-generation", "1", "--generations", "2", *extra], timeout=80)

    assert rc == 0, launch.log_summary()
    stall = launch.event("stall_detected")
    assert stall["generation"] == 1 and stall["idle_s"] >= STALL_S - 0.1
    usr1, term = _signal_event(launch, "SIGUSR1"), _signal_event(launch, "SIGTERM")
    assert stamp(usr1) >= stamp(stall)
    # min(5, --grace) seconds for the stack dumps before the stop.
    assert stamp(term) - stamp(usr1) >= min(5.0, GRACE_S) - 0.1, (usr1, term)
    hung = sorted(scene.ready(1))
    assert hung == [0, 1]
    assert sorted(usr1["pids"]) == sorted(term["pids"]) == sorted(pid for pid, _ in scene.ready(1).values())
    seen = scene.signals()
    assert sorted(seen) == [0, 1]
    for rank, names in seen.items():
        assert names[:2] == ["SIGUSR1", "SIGTERM"], (rank, names)
        assert names.count("SIGUSR1") == 1 and set(names) <= {"SIGUSR1", "SIGTERM"}, (rank, names)
    if workers == "ignore_sigterm":  # then SIGKILLed once the grace period after the SIGTERM ran out
        killed = launch.event("run_killed")
        assert killed["processes"] >= 2 and stamp(killed) - stamp(term) >= GRACE_S - 0.1
    else:
        assert "run_killed" not in launch.event_names()
    failed = launch.event("generation_failed")
    assert failed["generation"] == 1
    retry = launch.event("retry_scheduled")
    assert retry["failures"] == 1 and "stalled" in retry["reason"]
    assert generations(launch) == [(1, None), (2, None)]
    assert [(e["generation"], e["complete"]) for e in launch.events("generation_ended")] == [(2, True)]


def test_a_stall_every_time_spends_the_budget_and_exits_4(scene):
    launch, rc = scene.run("--nproc", "2", "--stall-timeout", "1.5", "--grace", "0.5", "--backoff", "0.1",
                           "--max-failures", "2", script_args=["--hang"], timeout=80)

    assert rc == 4, launch.log_summary()
    assert [e["generation"] for e in launch.events("stall_detected")] == [1, 2]
    finished = launch.event("run_finished")
    assert "2 consecutive" in finished["reason"] and "stalled" in finished["reason"]


@pytest.mark.parametrize("mode", ["ddp", "data_parallel"])
def test_writes_to_the_save_folder_keep_a_generation_longer_than_the_stall_timeout_alive(scene, mode):
    # Rank 0 (the one process with --data-parallel) rewrites latest.pt every 0.3 s for 4.5 s, one and a half
    # times the stall timeout.
    mode_args = ["--nproc", "2"] if mode == "ddp" else ["--data-parallel"]
    launch, rc = scene.run(*mode_args, "--stall-timeout", str(STALL_S), "--grace", str(GRACE_S),
                           script_args=["--heartbeat", "0.3", "--train-seconds", "4.5", "--generations", "1"],
                           timeout=80)

    assert rc == 0, launch.log_summary()
    assert "stall_detected" not in launch.event_names()
    assert scene.signals() == {}
    ended = launch.event("generation_ended")
    assert ended["complete"] and ended["duration_s"] >= 4.5


def test_workers_killed_by_the_stall_sigusr1_count_as_a_stall_and_are_retried(scene):
    # A script without a SIGUSR1 handler dies of it at once: still a stall, retried, and the run completes.
    launch, rc = scene.run("--nproc", "2", "--stall-timeout", str(STALL_S), "--grace", str(GRACE_S), "--backoff", "0.2",
                           script_args=["--hang-generation", "1", "--generations", "2", "--default-sigusr1"],
                           timeout=80)

    assert rc == 0, launch.log_summary()
    assert launch.event("stall_detected")["generation"] == 1
    assert [e["signal"] for e in launch.events("signal_forwarded")] == ["SIGUSR1"]
    failed = launch.event("generation_failed")
    assert failed["generation"] == 1 and failed["exit"] == "signal SIGUSR1"
    retry = launch.event("retry_scheduled")
    assert "stalled" in retry["reason"] and "SIGUSR1" in retry["reason"]
    assert generations(launch) == [(1, None), (2, None)]
