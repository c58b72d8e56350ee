"""Recovery from evidence, end to end with processes: workers lingering after the completion marker get the grace,
then are stopped, and nothing is retried (the marker is terminal). The rest of the evidence rules (a switch file
kept after a failure that does not prove it bad, each invocation's own budget, a run past its maximum, the user's
limits) are played as histories in tests/unit/test_histories_blame.py."""

from __future__ import annotations

import pytest

from pai_launch.agent.generation import LAUNCHER_LATE_TEST_ENV, WATCH_LATE_TEST_ENV
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


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_the_rank_that_failed_is_blamed_not_the_one_torch_stopped_whose_end_was_seen_first(scene, mode):
    """Rank 0 exits 3 while rank 1 trains on; torch's launcher stops rank 1. A fault hook makes the agent's watch see
    rank 0's exit 1.5 s late (as when its thread waits for a busy CPU) and torch's launcher return late, so the watch
    concludes and rank 1's stop is seen first. The verdict goes by who torch stopped, not by that order."""
    launch, rc = scene.run("--nproc", "2", "--max-failures", "1", *(["--cold"] if mode == "cold" else []),
                           script_args=["--generations", "1", "--fail-rank", "0", "--fail-generation", "1",
                                        "--hang-rank", "1", "--hang-generation", "1"],
                           env={WATCH_LATE_TEST_ENV: "0:1.5", LAUNCHER_LATE_TEST_ENV: "3"})

    assert rc == 4, launch.log_summary()
    failed = launch.event("generation_failed")
    assert (failed["rank"], failed["exit"]) == (0, "exit code 3"), launch.log_summary()
    assert failed["failed_ranks"] == [0, 1] and failed["exit_codes"] == {"0": 3, "1": 143}
    assert "rank 0 failed with exit code 3" in launch.event("run_finished")["reason"]
    assert scene.signal_log.read_text().split("\n")[0] == "1 SIGTERM"  # torch's stop did reach rank 1
