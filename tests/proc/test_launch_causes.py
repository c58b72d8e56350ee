"""A rank that dies of a known PerforatedAI/DDP failure, end to end: the failure event, the run's reason and
`pai-launch status` name the cause, its fix and the doctor check, past a faulthandler dump's noise."""

from __future__ import annotations

import pytest

from pai_launch.status import gather as run_status
from tests.unit.test_failure_causes import FAULTHANDLER_ABORT, RANK_UNSET

pytestmark = pytest.mark.timeout(90)


def test_a_buffer_size_mismatch_abort_is_named_in_the_log_the_reason_and_status(scene):
    dump = scene.work / "dump.txt"
    dump.write_text(FAULTHANDLER_ABORT)
    launch, rc = scene.run("--nproc", "2", "--grace", "3", "--max-failures", "1",
                           script_args=["--fail-rank", "1", "--fail-signal", "6", "--fail-output", str(dump)])

    assert rc == 4, launch.log_summary()
    failed = launch.event("generation_failed")
    assert failed["rank"] == 1 and failed["log_line"].startswith("what():  [enforce fail at ../third_party/gloo")
    assert failed["doctor_id"] == "ddp-broadcast-buffers" and "broadcast_buffers=False" in failed["fix"]
    tail = launch.event("worker_log_tail")
    assert tail["log_line"] == failed["log_line"] and "threading.py" not in tail["tail"]  # other threads dropped
    reason = launch.event("run_finished")["reason"]
    assert "rank 1" in reason and "pai-launch doctor check ddp-broadcast-buffers" in reason
    status = run_status.gather(scene.work / "PAI")
    detail = [g for g in status.generations if g.outcome == "failed"][0].detail
    assert "last log line: what():" in detail and "ddp-broadcast-buffers" in detail


def test_an_init_run_without_rank_is_named(scene):
    dump = scene.work / "dump.txt"
    dump.write_text(RANK_UNSET)
    launch, rc = scene.run("--nproc", "2", script_args=["--fail-init", "1", "--fail-output", str(dump)])

    assert rc == 3, launch.log_summary()
    tail = launch.event("init_output_tail")
    assert tail["doctor_id"] == "init-process-group-unguarded" and "RANK expected, but not set" in tail["log_line"]
    assert "init-process-group-unguarded" in launch.event("run_finished")["reason"]
