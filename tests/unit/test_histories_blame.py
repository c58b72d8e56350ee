"""Recovery from evidence over whole histories, in this process: a switch file is moved aside only when a failure
proves it bad; each invocation has its own failure budget; a run that grows past its maximum is named, and the
user's limits stop it. (Workers lingering after the marker, with processes: tests/proc/test_launch_blame.py.)"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from pai_launch.status import gather, render
from tests.scripted_world import Gen, complete, play, switch

TAILS = Path(__file__).resolve().parents[1] / "failure_tails"


def status_text(save: Path) -> str:
    return render.render_text(gather.gather(save))


def test_one_failure_of_the_only_rank_before_training_keeps_the_switch_file_and_counts_once(tmp_path):
    played = play(tmp_path, [switch(2), Gen(failures=((0, 3, "rank 0 failing on purpose with 3"),)), switch(4),
                             complete()],
                  nproc=1)

    assert played.exit_code == 0, played.names()
    assert "checkpoint_quarantined" not in played.names()
    assert [r["failures"] for r in played.all("retry_scheduled")] == [1]
    assert played.processes.load_folders() == [None, "PAI", "PAI", "PAI"]
    assert (tmp_path / "PAI" / "switch_2.pt").is_file()


@pytest.mark.parametrize("tail", ["store_barrier_timeout.txt", "perforate_config_race.txt"])
def test_every_rank_failing_at_start_up_for_a_transient_cause_keeps_the_switch_file(tmp_path, tail):
    """Rank 1 fails with the real output (a process group that timed out, PerforatedAI's config race) right after
    starting from switch_2.pt; rank 0 is stopped by the agent: both ranks failed, and the file is still good."""
    transient = Gen(failures=((1, 1, (TAILS / tail).read_text()), (0, -signal.SIGTERM, "")))
    played = play(tmp_path, [switch(2), transient, switch(4), complete()])

    assert played.exit_code == 0, played.names()
    failed = played.event("generation_failed")
    assert failed["generation"] == 2 and sorted(failed["failed_ranks"]) == [0, 1], failed
    assert "checkpoint_quarantined" not in played.names()
    retry = played.event("retry_scheduled")
    assert retry["failures"] == 1 and "cannot be loaded" not in retry["reason"]
    assert failed["doctor_id"] in ("process-group-timeout", "perforate-model-race")
    assert played.processes.load_folders()[-1] == "PAI"


def test_a_new_invocation_gets_a_full_budget_and_state_json_keeps_the_last_one(tmp_path):
    """The same command again after a run gave up (the script since fixed): its first failure is retried."""
    failing = [Gen(failures=((0, 3, f"attempt {n}"),)) for n in range(2)]
    first = play(tmp_path, failing, nproc=1, max_failures=2)
    assert first.exit_code != 0, first.names()
    first_state = first.state()
    assert first_state["failures"] == 2

    second = play(tmp_path, [Gen(failures=((0, 3, "once more"),)), complete()], nproc=1, max_failures=2)

    assert second.exit_code == 0, second.names()
    assert second.processes.inits == 0  # the first invocation's init run stands
    assert [r["failures"] for r in second.all("retry_scheduled")] == [1]
    state = second.state()
    assert state["failures"] == 1 and len(state["history"]) == 1, state  # this invocation counted its own one
    assert state["history"][0]["failures"] == first_state["failures"]
    assert state["history"][0]["last_exit"]["code"] == first_state["last_exit"]["code"]
    shown = status_text(tmp_path / "PAI")
    assert (f"invocations: 2 (each with its own failure budget; the one before ended with exit "
            f"{first_state['last_exit']['code']} after {first_state['failures']} failed generation(s) in a row; "
            "this one: 1)") in shown, shown


def test_max_generations_stops_the_run_with_exit_0_and_says_so(tmp_path):
    played = play(tmp_path, [switch(2 * n) for n in range(1, 5)], nproc=1, max_generations=2)

    assert played.exit_code == 0, played.names()
    assert len(played.processes.requests) == 2
    assert "--max-generations 2 reached (training was not complete)" in played.event("run_finished")["reason"]
    assert not (tmp_path / "PAI" / ".training_complete").exists()


def test_dendrites_past_the_scripts_maximum_are_named_and_max_dendrites_stops_the_run(tmp_path):
    save = tmp_path / "PAI"
    save.mkdir()
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    (save / "PAI_config.json").write_text(json.dumps({"max_dendrites": 1}))

    played = play(tmp_path, [switch(2 * n) for n in range(1, 6)], nproc=1, max_dendrites=3)

    assert played.exit_code == 0, played.names()
    past = played.event("dendrites_past_maximum")
    assert (past["dendrites"], past["max_dendrites"]) == (2, 1), past
    assert "--max-dendrites 3 reached" in played.event("run_finished")["reason"]
    assert len(played.processes.requests) == 3
    shown = status_text(save)
    assert "dendrites_past_maximum" in shown and "max_dendrites 1" in shown, shown


def test_in_process_mode_with_a_script_that_exits_at_restructures_says_so_once(tmp_path):
    played = play(tmp_path, [switch(2), switch(4), complete()], nproc=1, restructure="in-process")

    assert played.exit_code == 0, played.names()
    (noted,) = played.all("in_process_unused")
    assert noted["generation"] == 1 and "after_restructure" in noted["hint"], noted
    assert len(played.processes.requests) == 3
    shown = status_text(tmp_path / "PAI")
    assert "in_process_unused" in shown and "after_restructure" in shown, shown


def test_status_lists_a_failed_and_retried_generation_with_its_rank_and_exit(tmp_path):
    played = play(tmp_path, [switch(2), Gen(failures=((1, 3, "rank 1 failing on purpose with 3"),)), switch(4),
                             complete()])
    assert played.exit_code == 0, played.names()

    status = gather.gather(tmp_path / "PAI")

    failed = [g for g in status.generations if g.outcome == "failed"]
    assert len(failed) == 1 and (failed[0].number, failed[0].rank, failed[0].exit) == (2, 1, "exit code 3")
    assert "failing on purpose" in failed[0].detail
    assert (status.failures, status.retries) == (1, 1) and status.generations[-1].outcome == "complete"
    text = render.render_text(status)
    assert "rank 1 failed with exit code 3" in text and "retry_scheduled" in text
