"""--stall-timeout over whole histories, in this process: no write to the save folder for that long while workers run
is a hang: stall_detected, SIGUSR1 to the workers (stack dumps), min(5, --grace) s later SIGTERM (then --grace, then
SIGKILL), and the generation counts as a failure that is retried. Writes keep a long generation alive. (A hung
generation of real processes, and the signals real workers receive: tests/proc/test_launch_stall.py.)"""

from __future__ import annotations

import pytest

from tests.scripted_world import Gen, complete, play

STALL_S = 1.0
GRACE_S = 0.5


def signals_of(played, generation: int) -> dict[int, list[tuple[str, float]]]:
    """rank -> (signal name, when) each worker of `generation` received, in order."""
    seen: dict[int, list[tuple[str, float]]] = {}
    for gen, rank, name, at in played.processes.signals:
        if gen == generation:
            seen.setdefault(rank, []).append((name, at))
    return seen


@pytest.mark.parametrize("workers", ["obey_sigterm", "ignore_sigterm"])
def test_a_hung_generation_gets_sigusr1_then_is_stopped_and_retried_to_completion(tmp_path, workers):
    hung = Gen(hangs=True, ignores_sigterm=workers == "ignore_sigterm")
    played = play(tmp_path, [hung, complete()], stall_timeout=STALL_S, grace=GRACE_S, backoff=0.1, backoff_max=0.1)

    assert played.exit_code == 0, played.names()
    stall = played.event("stall_detected")
    assert stall["generation"] == 1 and stall["idle_s"] >= STALL_S - 0.1
    seen = signals_of(played, 1)
    assert sorted(seen) == [0, 1]
    for rank, got in seen.items():
        names = [name for name, _ in got]
        assert names[:2] == ["SIGUSR1", "SIGTERM"] and names.count("SIGUSR1") == 1, (rank, names)
        usr1, term = got[0][1], got[1][1]
        assert usr1 - played.processes.asked_at[0] >= STALL_S - 0.1, "no stack dump before the stall timeout"
        assert term - usr1 >= min(5.0, GRACE_S) - 0.05, "min(5, --grace) seconds for the stack dumps first"
        if workers == "ignore_sigterm":  # then SIGKILLed once the grace after the SIGTERM ran out
            assert names == ["SIGUSR1", "SIGTERM", "SIGKILL"] and got[2][1] - term >= GRACE_S - 0.05, (rank, got)
        else:
            assert names == ["SIGUSR1", "SIGTERM"], (rank, names)
    forwarded = {e["signal"]: e["pids"] for e in played.all("signal_forwarded")}
    assert sorted(forwarded["SIGUSR1"]) == sorted(forwarded["SIGTERM"]) and len(forwarded["SIGUSR1"]) == 2
    assert ("run_killed" in played.names()) is (workers == "ignore_sigterm")
    assert played.event("generation_failed")["generation"] == 1
    retry = played.event("retry_scheduled")
    assert retry["failures"] == 1 and "stalled" in retry["reason"]
    assert played.processes.load_folders() == [None, None]
    assert [(e["generation"], e["complete"]) for e in played.all("generation_ended")] == [(2, True)]


def test_a_stall_every_time_spends_the_budget_and_exits_4(tmp_path):
    played = play(tmp_path, [Gen(hangs=True), Gen(hangs=True)], stall_timeout=STALL_S, grace=GRACE_S, backoff=0.1,
                  backoff_max=0.1, max_failures=2)

    assert played.exit_code == 4, played.names()
    assert [e["generation"] for e in played.all("stall_detected")] == [1, 2]
    finished = played.event("run_finished")
    assert "2 consecutive" in finished["reason"] and "stalled" in finished["reason"]


def test_writes_to_the_save_folder_keep_a_generation_longer_than_the_stall_timeout_alive(tmp_path):
    # Rank 0 rewrites latest.pt every 0.2 s for twice the stall timeout.
    played = play(tmp_path, [Gen(writes=((".training_complete", b"complete"),), trains_for=2 * STALL_S, heartbeat=0.2)],
                  stall_timeout=STALL_S, grace=GRACE_S)

    assert played.exit_code == 0, played.names()
    assert "stall_detected" not in played.names() and played.processes.signals == []
    ended = played.event("generation_ended")
    assert ended["complete"] and ended["duration_s"] >= 2 * STALL_S


def test_workers_killed_by_the_stall_sigusr1_count_as_a_stall_and_are_retried(tmp_path):
    # A script without a SIGUSR1 handler dies of it at once: still a stall, retried, and the run completes.
    played = play(tmp_path, [Gen(hangs=True, dies_of_sigusr1=True), complete()], stall_timeout=STALL_S, grace=GRACE_S,
                  backoff=0.1, backoff_max=0.1)

    assert played.exit_code == 0, played.names()
    assert played.event("stall_detected")["generation"] == 1
    assert [e["signal"] for e in played.all("signal_forwarded")] == ["SIGUSR1"]
    failed = played.event("generation_failed")
    assert failed["generation"] == 1 and failed["exit"] == "signal SIGUSR1"
    retry = played.event("retry_scheduled")
    assert "stalled" in retry["reason"] and "SIGUSR1" in retry["reason"]
    assert played.processes.load_folders() == [None, None]
