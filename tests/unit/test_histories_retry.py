"""The failure policy over whole histories, in this process: a failed generation is retried from the newest switch
file after an exponential backoff, within --max-failures consecutive failures without progress; progress (a new
switch file, even from a failed generation) resets the budget; a spent budget exits 4; the same crash twice ends the
run with its code. (One retry end to end, with processes: tests/proc/test_launch_retry.py.)"""

from __future__ import annotations

import signal

import pytest

from pai_launch.core import exitcodes
from tests.scripted_world import Gen, checkpoint, complete, play, switch


def crash(rank: int = 0, code: int = 6, *, training: bool = True, tail: str = "") -> Gen:
    """A generation whose rank fails; `training`: after its first training write (latest.pt), as PerforatedAI's
    epochs write it."""
    writes = (("latest.pt", checkpoint()),) if training else ()
    return Gen(writes=writes, failures=((rank, code, tail or f"rank {rank} failing on purpose with {code}"),))


def test_a_generation_failing_every_time_exits_4_after_max_failures_with_doubling_backoff(tmp_path):
    played = play(tmp_path, [crash(), crash(), crash()], backoff=0.1, backoff_max=10.0, max_failures=3)

    assert played.exit_code == exitcodes.BUDGET_EXHAUSTED, played.names()
    failed = played.all("generation_failed")
    assert [(f["generation"], f["rank"], f["exit"], f["reached_training"]) for f in failed] == [
        (1, 0, "exit code 6", True), (2, 0, "exit code 6", True), (3, 0, "exit code 6", True)]
    assert [(r["delay_s"], r["failures"], r["max_failures"])
            for r in played.all("retry_scheduled")] == [(0.1, 1, 3), (0.2, 2, 3)]
    first, second = played.retry_gaps()
    assert first >= 0.1 - 0.02 and second >= 0.2 - 0.02, (first, second)
    tails = played.all("worker_log_tail")
    assert len(tails) == 3 and all(t["rank"] == 0 and "rank 0 failing on purpose with 6" in t["tail"] for t in tails)
    finished = played.event("run_finished")
    assert finished["generations"] == 3
    assert "3 consecutive" in finished["reason"] and "rank 0" in finished["reason"] \
        and "exit code 6" in finished["reason"]
    assert played.processes.load_folders() == [None, None, None]
    state = played.state()
    assert (state["generation"], state["failures"], state["last_exit"]["code"]) == (3, 3, 4)


@pytest.mark.parametrize("max_failures", [None, 4], ids=["default", "max_failures_4"])
def test_the_same_crash_after_training_started_is_tried_twice_unless_max_failures_asks_for_more(tmp_path, max_failures):
    budget = {} if max_failures is None else {"max_failures": max_failures}
    played = play(tmp_path, [crash()] * 4, backoff=0.01, backoff_max=0.01, **budget)

    failed = played.all("generation_failed")
    assert all(f["reached_training"] and (f["rank"], f["exit"]) == (0, "exit code 6") for f in failed), failed
    finished = played.event("run_finished")
    if max_failures is None:
        assert played.exit_code == 6, played.names()
        assert [f["generation"] for f in failed] == [1, 2]
        assert [r["failures"] for r in played.all("retry_scheduled")] == [1]
        assert "the same crash as the attempt before" in finished["reason"] and "rank 0" in finished["reason"]
        assert "--max-failures" in finished["reason"]
    else:
        assert played.exit_code == exitcodes.BUDGET_EXHAUSTED, played.names()
        assert [f["generation"] for f in failed] == [1, 2, 3, 4]
        assert [r["failures"] for r in played.all("retry_scheduled")] == [1, 2, 3]
        assert "gave up after 4 consecutive" in finished["reason"]


def test_an_identical_failure_before_training_is_retried_once_then_exits_with_its_code(tmp_path):
    played = play(tmp_path, [crash(1, 7, training=False)] * 3, backoff=0.01, backoff_max=0.01)

    assert played.exit_code == 7, played.names()
    assert [(f["generation"], f["rank"], f["reached_training"]) for f in played.all("generation_failed")] == [
        (1, 1, False), (2, 1, False)]


def test_the_backoff_doubles_up_to_backoff_max(tmp_path):
    played = play(tmp_path, [crash(tail="a"), crash(tail="b"), crash(tail="c")], backoff=0.1, backoff_max=0.15,
                  max_failures=3)

    assert played.exit_code == exitcodes.BUDGET_EXHAUSTED, played.names()
    # 0.1, then 0.2 capped to 0.15.
    assert [(r["delay_s"], r["failures"]) for r in played.all("retry_scheduled")] == [(0.1, 1), (0.15, 2)]
    first, second = played.retry_gaps()
    assert first >= 0.1 - 0.02 and second >= 0.15 - 0.02, (first, second)


def test_a_generation_that_writes_a_switch_file_resets_the_failure_budget(tmp_path):
    # --max-failures 2: generations 1 and 3 fail. Without the reset by generation 2's switch file the second failure
    # would spend the budget (exit 4); with it, the run completes.
    played = play(tmp_path, [crash(tail="first"), switch(4), crash(tail="second"), complete()], max_failures=2,
                  backoff=0.01, backoff_max=0.01)

    assert played.exit_code == 0, played.names()
    assert [e["generation"] for e in played.all("generation_failed")] == [1, 3]
    assert [r["failures"] for r in played.all("retry_scheduled")] == [1, 1]
    assert [e["switch_files"] for e in played.all("generation_ended")] == [["switch_4.pt"], []]
    # The retry of generation 3 resumes from the newest switch file, the one generation 2 wrote.
    assert played.processes.load_folders() == [None, None, "PAI", "PAI"]


def test_a_failed_generation_that_still_wrote_a_switch_file_counts_as_progress(tmp_path):
    # Rank 1 fails only after rank 0 saved the generation's switch file, in generations 1 and 2. With --max-failures
    # 2, counting those as failures without progress would exit 4 after generation 2.
    after_switch = [Gen(writes=((f"switch_{n}.pt", checkpoint()),), failures=((1, 1, f"late {n}"),)) for n in (2, 4)]
    played = play(tmp_path, [*after_switch, complete()], max_failures=2, backoff=0.01, backoff_max=0.01)

    assert played.exit_code == 0, played.names()
    failed = played.all("generation_failed")
    assert [(f["generation"], f["rank"], f["switch_files"]) for f in failed] == [(1, 1, ["switch_2.pt"]),
                                                                                 (2, 1, ["switch_4.pt"])]
    assert [r["failures"] for r in played.all("retry_scheduled")] == [1, 1]
    assert played.processes.load_folders() == [None, "PAI", "PAI"]
    assert played.state()["last_switch"] == "switch_4.pt"


def test_a_stop_signal_during_the_backoff_ends_the_run_at_once(tmp_path):
    # The 600 s backoff is never waited out: the test's own time limit would end it first.
    played = play(tmp_path, [Gen(writes=(("latest.pt", checkpoint()),), failures=((0, 3, "boom"),),
                                 then_signal=signal.SIGTERM)], backoff=600.0, backoff_max=600.0)

    assert played.exit_code == 143, played.names()
    assert len(played.processes.requests) == 1
    assert played.event("signal_received")["phase"] == "backoff"
    assert "SIGTERM" in played.event("run_finished")["reason"]
    state = played.state()
    assert (state["generation"], state["failures"], state["last_exit"]["code"]) == (1, 1, 143)


def test_a_data_parallel_failure_stops_with_its_code_instead_of_training_again_from_scratch(tmp_path):
    played = play(tmp_path, [crash(0, 9)], data_parallel=True)

    assert played.exit_code == 9, played.names()
    assert "retry_scheduled" not in played.names()
    reason = played.event("run_finished")["reason"]
    assert "rank 0 failed with exit code 9" in reason and "no resume" in reason and "--max-failures" in reason
    assert played.processes.dp_runs == 1  # one training process: nothing started over


def test_a_data_parallel_failure_is_retried_from_the_start_when_retries_were_asked_for(tmp_path):
    played = play(tmp_path, [crash(0, 3), complete()], data_parallel=True, max_failures=2, backoff=0.01,
                  backoff_max=0.01)

    assert played.exit_code == 0, played.names()
    assert "from the start" in played.event("retry_scheduled")["reason"]
    assert played.processes.dp_runs == 2
