"""Stops finish after an earlier kill, over whole histories in this process: generation 1 stalls with workers that
ignore SIGTERM, is killed at its grace deadline and retried; a stop signal in generation 2 is still followed by SIGKILL
at its own grace deadline, and a second SIGINT there still kills at once. (Real workers that ignore SIGTERM, killed:
tests/proc/test_launch_stall.py and tests/proc/test_launch_signals.py.)"""

from __future__ import annotations

import signal

from tests.scripted_world import Gen, play
from tests.unit.test_histories_stall import signals_of

STALL_S = 1.0


def _stalled_then_retried(tmp_path, grace: float, then: Gen):
    """Generation 1 hangs past the stall timeout with workers that ignore SIGTERM; generation 2 plays `then`."""
    stalled = Gen(hangs=True, ignores_sigterm=True)
    played = play(tmp_path, [stalled, then], stall_timeout=STALL_S, grace=grace, backoff=0.1, backoff_max=0.1)
    assert [e["generation"] for e in played.all("stall_detected")] == [1], played.names()
    return played


def test_sigterm_after_a_stall_was_killed_and_retried_is_followed_by_sigkill_at_the_grace_deadline(tmp_path):
    grace = 0.5
    played = _stalled_then_retried(tmp_path, grace, Gen(hangs=True, ignores_sigterm=True,
                                                        then_signal=signal.SIGTERM))

    assert played.exit_code == 143, played.names()
    (received,) = played.all("signal_received")
    assert (received["signal"], received["phase"]) == ("SIGTERM", "training")
    first, second = played.all("run_killed")
    assert first["processes"] >= 2 and second["processes"] >= 2
    for rank, got in signals_of(played, 2).items():
        names = [name for name, _ in got]
        assert names == ["SIGTERM", "SIGKILL"], (rank, names)
        assert got[1][1] - got[0][1] >= grace - 0.05, "SIGKILL only once the grace after the SIGTERM ran out"
    assert played.processes.load_folders() == [None, None]
    finished = played.event("run_finished")
    assert finished["exit_code"] == 143 and "SIGTERM" in finished["reason"]


def test_a_second_sigint_after_a_stall_was_killed_and_retried_kills_at_once(tmp_path):
    grace = 30.0  # a kill at the deadline would take this long: the second SIGINT must not wait for it
    played = _stalled_then_retried(tmp_path, grace, Gen(hangs=True, ignores_sigterm=True, ignores_sigint=True,
                                                        then_signal=signal.SIGINT, and_signals=(signal.SIGINT,)))

    assert played.exit_code == 130, played.names()
    one, two = played.all("signal_received")
    assert (one["signal"], two["signal"]) == ("SIGINT", "SIGINT")
    first, killed = played.all("run_killed")
    assert killed["processes"] >= 2
    for rank, got in signals_of(played, 2).items():
        names = [name for name, _ in got]
        assert names == ["SIGINT", "SIGKILL"], (rank, names)  # the first SIGINT once each, then the kill
        assert got[1][1] - got[0][1] < grace / 2, "killed at the second SIGINT, not at the grace deadline"
    assert played.event("run_finished")["exit_code"] == 130
