"""A failed generation retried end to end, with real processes: after the backoff, from scratch (no switch file yet),
within one run id and one init run. The policy itself (doubling backoff, the budget, progress resetting it, the same
crash twice, a stop during the backoff, DataParallel) is played as histories in tests/unit/test_histories_retry.py."""

from __future__ import annotations

import pytest

from tests.helpers import stamp
from tests.proc.launch_files import generations, read_state

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
