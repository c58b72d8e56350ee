"""The failure policy end to end: a failed generation is retried from the newest switch file after an
exponential backoff, within --max-failures consecutive failures without progress; progress (a new switch
file, even from a failed generation) resets the budget; a spent budget exits 4."""

from __future__ import annotations

import signal

import pytest

from tests.helpers import stamp
from tests.proc.launch_files import generations, read_state, wait_event

pytestmark = pytest.mark.timeout(90)

#: rank 0 rewrites SAVE/latest.pt while it trains: a failure after that is a failure "during training".
TRAINING = ["--heartbeat", "0.1", "--train-seconds", "0.3"]


def _worker_generations(scene) -> list[int]:
    return [int(r["env"]["PAI_LAUNCH_GENERATION"]) for r in scene.records() if not r["init"]]


def _gaps(launch) -> list[float]:
    """Seconds from each retry_scheduled event to the generation_started that follows it, plus the part of the
    backoff already spent when the line was written (the backoff counts from the failure's discovery)."""
    events = launch.events()
    gaps = []
    for index, event in enumerate(events):
        if event["event"] == "retry_scheduled":
            following = next(e for e in events[index:] if e["event"] == "generation_started")
            spent = event["delay_s"] - event["retry_in_s"]
            assert 0 <= spent <= event["delay_s"], event
            gaps.append(stamp(following) - stamp(event) + spent)
    return gaps


@pytest.mark.parametrize("when", ["during_training", "before_training"])
def test_a_generation_that_fails_once_is_retried_after_the_backoff_and_the_run_completes(scene, when):
    extra = TRAINING if when == "during_training" else []
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.5",
                           script_args=["--fail-rank", "0", "--fail-generation", "1", "--generations", "3", *extra])

    assert rc == 0, launch.log_summary()
    failed = launch.event("generation_failed")
    assert (failed["generation"], failed["rank"], failed["exit"]) == (1, 0, "exit code 3")
    assert failed["reached_training"] is (when == "during_training")
    retry = launch.event("retry_scheduled")
    assert (retry["delay_s"], retry["failures"], retry["max_failures"]) == (0.5, 1, 3)
    assert "rank 0" in retry["reason"] and "exit code 3" in retry["reason"]
    (gap,) = _gaps(launch)
    assert gap >= 0.5 - 0.05, gap
    # Generation 1 wrote no switch file: its retry starts from scratch; generation 3 loads generation 2's switch_4.pt.
    assert generations(launch) == [(1, None), (2, None), (3, "PAI")]
    assert _worker_generations(scene) == [1, 1, 2, 2, 3, 3]
    assert len({r["env"]["PAI_LAUNCH_RUN_ID"] for r in scene.records()}) == 1
    assert launch.event_names().count("init_started") == 1
    save = scene.work / "PAI"
    assert (save / ".training_complete").is_file() and (save / "switch_4.pt").is_file()
    assert not (save / "switch_2.pt").exists()
    state = read_state(save)
    assert (state["generation"], state["last_exit"]["code"]) == (3, 0)


def test_a_generation_failing_every_time_exits_4_after_max_failures_with_doubling_backoff(scene):
    # --max-failures given: the same crash is retried up to it (without it, only once).
    launch, rc = scene.run("--nproc", "2", "--backoff", "1", "--max-failures", "3",
                           script_args=["--fail-rank", "0", "--fail-every", "--fail-code", "6", *TRAINING])

    assert rc == 4, launch.log_summary()
    failed = launch.events("generation_failed")
    assert [(f["generation"], f["rank"], f["exit"], f["reached_training"]) for f in failed] == [
        (1, 0, "exit code 6", True), (2, 0, "exit code 6", True), (3, 0, "exit code 6", True)]
    retries = launch.events("retry_scheduled")
    assert [(r["delay_s"], r["failures"], r["max_failures"]) for r in retries] == [(1.0, 1, 3), (2.0, 2, 3)], \
        launch.log_summary()
    gaps = _gaps(launch)
    assert gaps[0] >= 1.0 - 0.05 and gaps[1] >= 2.0 - 0.05, gaps
    assert gaps[1] > gaps[0]
    tails = launch.events("worker_log_tail")
    assert len(tails) == 3 and all(t["rank"] == 0 and "rank 0 failing on purpose with 6" in t["tail"] for t in tails)
    finished = launch.event("run_finished")
    assert finished["exit_code"] == 4 and finished["generations"] == 3
    assert "3 consecutive" in finished["reason"] and "rank 0" in finished["reason"] and "exit code 6" in finished["reason"]
    assert generations(launch) == [(1, None), (2, None), (3, None)]
    state = read_state(scene.work / "PAI")
    assert (state["generation"], state["failures"], state["last_exit"]["code"]) == (3, 3, 4)


@pytest.mark.parametrize("max_failures", [None, 4], ids=["default", "max_failures_4"])
def test_the_same_crash_after_training_started_is_tried_twice_unless_max_failures_asks_for_more(scene, max_failures):
    budget = [] if max_failures is None else ["--max-failures", str(max_failures)]
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.1", *budget,
                           script_args=["--fail-rank", "0", "--fail-every", "--fail-code", "6", *TRAINING])

    failed = launch.events("generation_failed")
    assert all(f["reached_training"] and (f["rank"], f["exit"]) == (0, "exit code 6") for f in failed), failed
    finished = launch.event("run_finished")
    if max_failures is None:
        assert rc == 6, launch.log_summary()
        assert [f["generation"] for f in failed] == [1, 2]
        assert [r["failures"] for r in launch.events("retry_scheduled")] == [1]
        assert "the same crash as the attempt before" in finished["reason"] and "rank 0" in finished["reason"]
        assert "--max-failures" in finished["reason"]
    else:
        assert rc == 4, launch.log_summary()
        assert [f["generation"] for f in failed] == [1, 2, 3, 4]
        assert [r["failures"] for r in launch.events("retry_scheduled")] == [1, 2, 3]
        assert "gave up after 4 consecutive" in finished["reason"]


def test_the_backoff_doubles_up_to_backoff_max(scene):
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.2", "--backoff-max", "0.3", "--max-failures", "3",
                           script_args=["--fail-rank", "0", "--fail-every", *TRAINING])

    assert rc == 4, launch.log_summary()
    # 0.2, then 0.4 capped to 0.3.
    assert [(r["delay_s"], r["failures"]) for r in launch.events("retry_scheduled")] == [(0.2, 1), (0.3, 2)]
    gaps = _gaps(launch)
    assert gaps[0] >= 0.2 - 0.05 and gaps[1] >= 0.3 - 0.05, gaps
    assert [e["generation"] for e in launch.events("generation_failed")] == [1, 2, 3]
    assert "3 consecutive" in launch.event("run_finished")["reason"]


def test_a_generation_that_writes_a_switch_file_resets_the_failure_budget(scene):
    # --max-failures 2: generations 1 and 3 fail. Without the reset by generation 2's switch file the second
    # failure would spend the budget (exit 4); with it, the run completes.
    launch, rc = scene.run("--nproc", "2", "--max-failures", "2", "--backoff", "0.2",
                           script_args=["--fail-rank", "0", "--fail-generation", "1,3", "--generations", "4", *TRAINING])

    assert rc == 0, launch.log_summary()
    assert [e["generation"] for e in launch.events("generation_failed")] == [1, 3]
    assert [(r["failures"], r["delay_s"]) for r in launch.events("retry_scheduled")] == [(1, 0.2), (1, 0.2)]
    assert [e["switch_files"] for e in launch.events("generation_ended")] == [["switch_4.pt"], []]
    # The retry of generation 3 resumes from the newest switch file, the one generation 2 wrote.
    assert generations(launch) == [(1, None), (2, None), (3, "PAI"), (4, "PAI")]
    assert _worker_generations(scene) == [1, 1, 2, 2, 3, 3, 4, 4]


def test_a_failed_generation_that_still_wrote_a_switch_file_counts_as_progress(scene):
    # Rank 1 fails only after rank 0 saved the generation's switch file, in generations 1 and 2. With
    # --max-failures 2, counting those as failures without progress would exit 4 after generation 2.
    launch, rc = scene.run("--nproc", "2", "--max-failures", "2", "--backoff", "0.2",
                           script_args=["--fail-rank", "1", "--fail-generation", "1,2", "--fail-after-switch",
                                        "--generations", "3"])

    assert rc == 0, launch.log_summary()
    failed = launch.events("generation_failed")
    assert [(f["generation"], f["rank"], f["switch_files"]) for f in failed] == [
        (1, 1, ["switch_2.pt"]), (2, 1, ["switch_4.pt"])]
    assert [r["failures"] for r in launch.events("retry_scheduled")] == [1, 1]
    assert generations(launch) == [(1, None), (2, "PAI"), (3, "PAI")]
    for record in scene.records():
        if record["env"]["PAI_LAUNCH_GENERATION"] in ("2", "3"):
            assert record["argv"][-2:] == ["--pai_load_folder", "PAI"], record["argv"]
    assert read_state(scene.work / "PAI")["last_switch"] == "switch_4.pt"


def test_a_stop_signal_during_the_backoff_ends_the_run_at_once(scene):
    launch = scene.start("--nproc", "2", "--backoff", "30",
                         script_args=["--fail-rank", "0", "--fail-generation", "1", *TRAINING])
    wait_event(launch, "retry_scheduled", 45)

    sent = launch.send(signal.SIGTERM)
    rc = launch.wait(20)

    assert rc == 143, launch.log_summary()
    assert launch.ended - sent < 5, "the 30 s backoff must not be waited out"
    assert generations(launch) == [(1, None)]
    assert launch.event("signal_received")["phase"] == "backoff"
    assert "SIGTERM" in launch.event("run_finished")["reason"]
    state = read_state(scene.work / "PAI")
    assert (state["generation"], state["failures"], state["last_exit"]["code"]) == (1, 1, 143)


def test_a_data_parallel_failure_stops_with_its_code_instead_of_training_again_from_scratch(scene):
    launch, rc = scene.run("--data-parallel", script_args=["--fail-rank", "0", "--fail-code", "9", "--generations", "1"])

    assert rc == 9, launch.log_summary()
    assert "retry_scheduled" not in launch.event_names()
    reason = launch.event("run_finished")["reason"]
    assert "rank 0 failed with exit code 9" in reason and "no resume" in reason and "--max-failures" in reason
    assert _worker_generations(scene) == [1]  # one training process: nothing started over


def test_a_data_parallel_failure_is_retried_from_the_start_when_retries_were_asked_for(scene):
    launch, rc = scene.run("--data-parallel", "--max-failures", "2", "--backoff", "0.1",
                           script_args=["--fail-rank", "0", "--fail-generation", "1", "--generations", "1"])

    assert rc == 0, launch.log_summary()
    assert "from the start" in launch.event("retry_scheduled")["reason"]
    assert _worker_generations(scene) == [1, 2]
    assert [r["load_folder"] for r in scene.records() if not r["init"]] == [None, None]
