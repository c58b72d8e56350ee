"""A rank that dies of a known PerforatedAI/DDP failure, over whole histories in this process: the failure event, the
run's reason and `pai-launch status` name the cause, its fix and the doctor check, past a faulthandler dump's noise;
an init run that fails the same way is named too. (The causes read from real logs: tests/unit/test_failure_causes.py;
a real rank's crash end to end: tests/proc/test_launch_cycle.py.)"""

from __future__ import annotations

import signal

from pai_launch.status import gather
from tests.scripted_world import Gen, console_events, play
from tests.unit.test_failure_causes import FAULTHANDLER_ABORT, RANK_UNSET


def test_a_buffer_size_mismatch_abort_is_named_in_the_log_the_reason_and_status(tmp_path):
    aborted = Gen(failures=((1, -signal.SIGABRT, FAULTHANDLER_ABORT),))
    played = play(tmp_path, [aborted], max_failures=1)

    assert played.exit_code == 4, played.names()
    failed = played.event("generation_failed")
    assert failed["rank"] == 1 and failed["exit"] == "signal SIGABRT"
    assert failed["log_line"].startswith("what():  [enforce fail at ../third_party/gloo")
    assert failed["doctor_id"] == "ddp-broadcast-buffers" and "broadcast_buffers=False" in failed["fix"]
    tail = played.event("worker_log_tail")
    assert tail["log_line"] == failed["log_line"]  # (the agent drops a dump's other threads: test_failure_causes)
    reason = played.event("run_finished")["reason"]
    assert "rank 1" in reason and "pai-launch doctor check ddp-broadcast-buffers" in reason
    shown = gather.gather(tmp_path / "PAI")
    detail = [g for g in shown.generations if g.outcome == "failed"][0].detail
    assert "last log line: what():" in detail and "ddp-broadcast-buffers" in detail


def test_an_init_run_without_rank_is_named(tmp_path, capsys):
    played = play(tmp_path, [], init_exit=(1, RANK_UNSET))

    assert played.exit_code == 3, played.names()
    assert played.processes.requests == [] and not (tmp_path / "PAI").exists(), "nothing written: no init run result"
    said = console_events(capsys)  # no save folder was written, so the console is the record
    tail = said["init_output_tail"]
    assert tail["doctor_id"] == "init-process-group-unguarded" and "RANK expected, but not set" in tail["log_line"]
    assert "init-process-group-unguarded" in said["run_finished"]["reason"]
