"""Stop signals over whole histories, in this process: a stop is counted as a stop, never a failure (even where a rank
crashes on its way out); workers that ignore it are killed when --grace runs out; a second Ctrl-C kills at once;
workers lingering after the marker are stopped after the grace. (Signals delivered to real processes, each once,
their grandchildren swept, the init run stopped: tests/proc/test_launch_signals.py.)"""

from __future__ import annotations

import signal

import pytest

from pai_launch.status import gather
from tests.scripted_world import Gen, checkpoint, play

TRAINING = (("latest.pt", checkpoint()),)


def received(played) -> dict[int, list[str]]:
    """rank -> the signal names its worker received, in order."""
    seen: dict[int, list[str]] = {}
    for _, rank, name, _ in played.processes.signals:
        seen.setdefault(rank, []).append(name)
    return seen


def test_a_stop_signal_mid_generation_is_logged_shown_and_counted_as_a_stop_not_a_failure(tmp_path):
    played = play(tmp_path, [Gen(writes=TRAINING, hangs=True, then_signal=signal.SIGTERM)], grace=10.0)

    assert played.exit_code == 143, played.names()
    assert not {"generation_failed", "worker_log_tail", "init_output_tail"} & set(played.names())
    ended = played.event("generation_stopped")
    assert (ended["generation"], ended["cause"], ended["reason"]) == (1, "SIGTERM", "stopped by SIGTERM")
    assert ended["level"] == "info"
    assert not {"rank", "log_line", "tail"} & set(ended)
    finished = played.event("run_finished")
    assert (finished["level"], finished["stopped_by"], finished["reason"]) == ("info", "SIGTERM", "stopped by SIGTERM")
    shown = gather.gather(tmp_path / "PAI")
    assert shown.failures == 0 and shown.exit_reason == "stopped by SIGTERM"
    assert shown.phase == "stopped as asked: exit code 143 (stopped by SIGTERM)"
    assert [(g.number, g.outcome) for g in shown.generations] == [(1, "stopped")]


def test_a_rank_that_crashes_while_stopped_is_named_but_the_run_is_still_stopped_not_failed(tmp_path):
    crash = (1, 3, "Traceback (most recent call last):\nRuntimeError: teardown failed while stopping")
    played = play(tmp_path, [Gen(hangs=True, crashes_on_stop=crash, then_signal=signal.SIGTERM)], grace=10.0)

    assert played.exit_code == 143, played.names()
    assert not {"generation_failed", "worker_log_tail", "retry_scheduled"} & set(played.names())
    stopped = played.event("generation_stopped")
    assert (stopped["level"], stopped["cause"]) == ("warning", "SIGTERM")
    assert (stopped["rank"], stopped["exit"]) == (1, "exit code 3")
    assert stopped["log_line"] == "RuntimeError: teardown failed while stopping"
    assert stopped["exit_codes"]["1"] == 3
    (generation,) = gather.gather(tmp_path / "PAI").generations
    assert generation.outcome == "stopped"
    assert "rank 1 had exited with exit code 3 (RuntimeError: teardown failed while stopping)" in generation.detail


def test_workers_ignoring_sigterm_are_killed_when_the_grace_runs_out(tmp_path):
    grace = 0.5
    played = play(tmp_path, [Gen(hangs=True, ignores_sigterm=True, then_signal=signal.SIGTERM)], grace=grace)

    assert played.exit_code == 143, played.names()
    # Each worker saw the SIGTERM exactly once over the whole grace: no re-sending on every tick; then the kill.
    assert received(played) == {0: ["SIGTERM", "SIGKILL"], 1: ["SIGTERM", "SIGKILL"]}
    times = {name: at for _, _, name, at in played.processes.signals}
    assert times["SIGKILL"] - times["SIGTERM"] >= grace - 0.05
    assert played.event("run_killed")["processes"] >= 2


def test_a_second_sigint_kills_at_once_instead_of_waiting_out_the_grace(tmp_path):
    played = play(tmp_path, [Gen(hangs=True, ignores_sigint=True, then_signal=signal.SIGINT,
                                 and_signals=(signal.SIGINT,))], grace=600.0)

    assert played.exit_code == 130, played.names()  # the test's own time limit is far below the 600 s grace
    assert received(played) == {0: ["SIGINT", "SIGKILL"], 1: ["SIGINT", "SIGKILL"]}, "not forwarded a second time"
    assert len(played.all("signal_received")) == 2
    assert played.event("run_killed")["processes"] >= 2


@pytest.mark.parametrize("rank0", ["obeys_sigterm", "ignores_sigterm"])
def test_the_marker_seen_while_the_workers_linger_stops_them_after_the_grace_and_exits_0(tmp_path, rank0):
    grace = 0.5
    lingering = Gen(writes=((".training_complete", b"complete"),), hangs=True,
                    ignores_sigterm=rank0 == "ignores_sigterm")
    played = play(tmp_path, [lingering], grace=grace)

    assert played.exit_code == 0, played.names()
    finished = played.event("run_finished")
    assert "grace" in finished["reason"]
    first = min(at for _, _, _, at in played.processes.signals)
    assert first - played.processes.asked_at[0] >= grace - 0.05, "the grace was given before the stop"
    if rank0 == "ignores_sigterm":  # then SIGKILLed a second grace later, and still a complete run
        assert received(played) == {0: ["SIGTERM", "SIGKILL"], 1: ["SIGTERM", "SIGKILL"]}
        assert played.event("run_killed")["processes"] >= 1
    else:
        assert received(played) == {0: ["SIGTERM"], 1: ["SIGTERM"]}
    assert len(played.processes.requests) == 1
