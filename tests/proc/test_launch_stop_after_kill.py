"""Stops finish after an earlier kill: generation 1 stalls with workers that ignore SIGTERM, is killed at its grace
deadline and retried; a stop signal in generation 2 is still followed by SIGKILL at its own grace deadline, and a
second SIGINT there still kills at once. Workers of both generations hang and ignore SIGTERM."""

from __future__ import annotations

import signal

import pytest

from tests.helpers import stamp, wait_until
from tests.proc.launch_files import generations

pytestmark = pytest.mark.timeout(120)

#: The reported run: `--stall-timeout 3 --grace 2`. Generation 2's workers are ready well within the stall timeout,
#: and are signalled then, so only generation 1 stalls.
STALL_S = 3.0
GRACE_S = 2.0


def _stalled_then_retried(scene, grace: float, *script_args: str):
    """Start the run and wait until generation 2's workers run, after generation 1's stall ended in a kill."""
    launch = scene.start("--nproc", "2", "--stall-timeout", str(STALL_S), "--grace", str(grace), "--backoff", "0.2",
                         script_args=["--hang", "--ignore-sigterm", *script_args])
    scene.wait_ready(2, 2, timeout=60)
    assert [e["generation"] for e in launch.events("stall_detected")] == [1], launch.log_summary()
    assert len(launch.events("run_killed")) == 1, launch.log_summary()
    return launch


def test_sigterm_after_a_stall_was_killed_and_retried_is_followed_by_sigkill_at_the_grace_deadline(scene):
    launch = _stalled_then_retried(scene, GRACE_S)

    sent = launch.send(signal.SIGTERM)
    rc = launch.wait(30)

    assert rc == 143, launch.log_summary()
    took = launch.ended - sent
    assert GRACE_S - 0.1 <= took < GRACE_S + 8, f"exit {took:.2f} s after SIGTERM with --grace {GRACE_S}"
    (received,) = launch.events("signal_received")
    assert (received["signal"], received["phase"]) == ("SIGTERM", "training")
    first, second = launch.events("run_killed")
    assert second["processes"] >= 2 and stamp(second) - stamp(received) >= GRACE_S - 0.1
    assert [e["generation"] for e in launch.events("stall_detected")] == [1]
    assert generations(launch) == [(1, None), (2, None)]
    finished = launch.event("run_finished")
    assert finished["exit_code"] == 143 and "SIGTERM" in finished["reason"]


def test_a_second_sigint_after_a_stall_was_killed_and_retried_kills_at_once(scene):
    grace = 4.0  # long enough that a kill at the deadline is told apart from one at the second SIGINT
    launch = _stalled_then_retried(scene, grace, "--ignore-sigint")
    before = {rank: names.count("SIGINT") for rank, names in scene.signals().items()}
    assert not any(before.values()), before

    launch.send(signal.SIGINT)
    wait_until(lambda: sorted(r for r, names in scene.signals().items() if "SIGINT" in names) == [0, 1], 20,
               message="both ranks of generation 2 to log the first SIGINT")
    second = launch.send(signal.SIGINT)
    rc = launch.wait(30)

    assert rc == 130, launch.log_summary()
    assert launch.ended - second < grace, "the second SIGINT must not wait out --grace"
    one, two = launch.events("signal_received")
    assert (one["signal"], two["signal"]) == ("SIGINT", "SIGINT")
    first, killed = launch.events("run_killed")
    assert killed["processes"] >= 2 and stamp(killed) - stamp(one) < grace - 0.5
    assert stamp(killed) >= stamp(two)
    assert all(names.count("SIGINT") == 1 for names in scene.signals().values()), scene.signals()
    assert launch.event("run_finished")["exit_code"] == 130
