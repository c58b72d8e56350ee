"""Recovery from evidence, end to end with processes: workers lingering after the completion marker get the grace,
then are stopped, and nothing is retried (the marker is terminal). The rest of the evidence rules (a switch file
kept after a failure that does not prove it bad, each invocation's own budget, a run past its maximum, the user's
limits) are played as histories in tests/unit/test_histories_blame.py."""

from __future__ import annotations

import pytest

from tests.proc.launch_files import generations

pytestmark = pytest.mark.timeout(120)


def test_workers_lingering_after_the_marker_are_stopped_and_the_run_is_complete(scene):
    """The stall clock stops at the marker: lingering workers get the grace, then are stopped; nothing is retried."""
    launch, rc = scene.run("--nproc", "2", "--stall-timeout", "2", "--grace", "6",
                           script_args=["--generations", "1", "--train-seconds", "1", "--linger-after-marker"])

    assert rc == 0, launch.log_summary()
    assert generations(launch) == [(1, None)]
    assert launch.events("stall_detected") == [] and launch.events("retry_scheduled") == []
    assert "training complete" in launch.event("run_finished")["reason"]
