"""What the service manager is told over a whole history, in this process (a real datagram listener stands in for
systemd): a retry and a stop. (A real run's readiness, phases, watchdog pings and a missing manager, with processes:
tests/proc/test_launch_systemd.py.)"""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from tests.helpers import wait_until
from tests.notify_listener import NotifyListener
from tests.scripted_world import Gen, checkpoint, play


@pytest.fixture
def listener():
    made = NotifyListener(f"@pai-launch-test-{uuid.uuid4().hex}")
    yield made
    made.close()


def test_a_retry_and_a_stop_are_told_to_the_service_manager(tmp_path, listener):
    # Rank 0 wrote switch_2.pt before rank 1 failed: a dendrite, counted as status counts it.
    failed = Gen(writes=(("switch_2.pt", checkpoint()),), failures=((1, 3, "rank 1 failing on purpose with 3"),))
    played = play(tmp_path, [failed, Gen(hangs=True, then_signal=signal.SIGTERM)], backoff=0.2, backoff_max=0.2,
                  grace=5.0, env={"NOTIFY_SOCKET": listener.address})

    assert played.exit_code == 143, played.names()
    # The listener's thread takes each datagram a moment after it was sent.
    wait_until(lambda: any(m.has("STOPPING=1") for m in listener.messages), 10, message="the STOPPING message")
    statuses = listener.statuses()
    retrying = "retrying after failure 1 of 3: rank 1 failed with exit code 3"
    assert any(s.startswith(retrying) for s in statuses), statuses
    assert "generation 2 running (after 1 failed attempt(s)); 1 dendrite" in statuses, statuses
    assert listener.messages[0].has("READY=1") and {m.pid for m in listener.messages} == {os.getpid()}
    assert listener.messages[-1].has("STOPPING=1") and listener.messages[-1].status() == "stopping: stopped by SIGTERM"
    assert not any(m.has("WATCHDOG=1") for m in listener.messages)  # no WATCHDOG_USEC: no pings
