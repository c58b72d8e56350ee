"""Recovery from evidence, end to end with the fake trainer and real failure output: a switch file is moved aside only
when the failure proves it bad; the completion marker is terminal; each invocation has its own failure budget; a run
that grows past its maximum is named, and the user's limits stop it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_tool
from tests.proc.launch_files import generations, make_resumable, quarantined, read_state

pytestmark = pytest.mark.timeout(120)

TAILS = Path(__file__).resolve().parents[1] / "failure_tails"


def test_one_failure_of_the_only_rank_before_training_keeps_the_switch_file_and_counts_once(scene):
    launch, rc = scene.run("--nproc", "1", "--backoff", "0.1",
                           script_args=["--generations", "3", "--fail-rank", "0", "--fail-generation", "2"])

    assert rc == 0, launch.log_summary()
    assert quarantined(scene.work / "PAI") == {} and launch.events("checkpoint_quarantined") == []
    assert [r["failures"] for r in launch.events("retry_scheduled")] == [1]
    assert generations(launch) == [(1, None), (2, "PAI"), (3, "PAI")]
    assert (scene.work / "PAI" / "switch_2.pt").is_file()


@pytest.mark.parametrize("tail", ["store_barrier_timeout.txt", "perforate_config_race.txt"])
def test_every_rank_failing_at_start_up_for_a_transient_cause_keeps_the_switch_file(scene, tail):
    """Rank 1 fails with the real output (a process group that timed out, PerforatedAI's config race) right after
    starting from switch_2.pt; rank 0 is stopped by the agent: both ranks failed, and the file is still good."""
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.1",
                           script_args=["--generations", "3", "--fail-rank", "1", "--fail-generation", "2",
                                        "--fail-output", str(TAILS / tail), "--hang-rank", "0", "--hang-generation", "2"])

    assert rc == 0, launch.log_summary()
    failed = launch.event("generation_failed")
    assert failed["generation"] == 2 and sorted(failed["failed_ranks"]) == [0, 1], failed
    assert launch.events("checkpoint_quarantined") == [] and quarantined(scene.work / "PAI") == {}
    retry = launch.event("retry_scheduled")
    assert retry["failures"] == 1 and "cannot be loaded" not in retry["reason"]
    assert failed["doctor_id"] in ("process-group-timeout", "perforate-model-race")
    assert generations(launch)[-1] == (3, "PAI")


def test_workers_lingering_after_the_marker_are_stopped_and_the_run_is_complete(scene):
    """The stall clock stops at the marker: lingering workers get the grace, then are stopped; nothing is retried."""
    launch, rc = scene.run("--nproc", "2", "--stall-timeout", "2", "--grace", "6",
                           script_args=["--generations", "1", "--train-seconds", "1", "--linger-after-marker"])

    assert rc == 0, launch.log_summary()
    assert generations(launch) == [(1, None)]
    assert launch.events("stall_detected") == [] and launch.events("retry_scheduled") == []
    assert "training complete" in launch.event("run_finished")["reason"]


def test_a_new_invocation_gets_a_full_budget_and_state_json_keeps_the_last_one(scene):
    """The same command again after a run gave up (the script since fixed): its first failure is retried."""
    args = ("--nproc", "1", "--backoff", "0.1", "--max-failures", "2")
    script = ["--generations", "4", "--fail-rank", "0", "--fail-generation", "1,2,3"]
    first, rc = scene.run(*args, script_args=script)
    assert rc != 0, first.log_summary()
    first_state = read_state(scene.work / "PAI")
    assert first_state["failures"] >= 1

    second, rc = scene.run(*args, script_args=script)
    assert rc == 0, second.log_summary()
    assert [r["failures"] for r in second.events("retry_scheduled")] == [1]
    state = read_state(scene.work / "PAI")
    assert state["failures"] == 1 and len(state["history"]) == 1, state  # this invocation counted its own one
    assert state["history"][0]["failures"] == first_state["failures"]
    assert state["history"][0]["last_exit"]["code"] == first_state["last_exit"]["code"]
    shown = run_tool("status", cwd=scene.work).stdout
    assert (f"invocations: 2 (each with its own failure budget; the one before ended with exit "
            f"{first_state['last_exit']['code']} after {first_state['failures']} failed generation(s) in a row; "
            "this one: 1)") in shown, shown


def test_max_generations_stops_the_run_with_exit_0_and_says_so(scene):
    launch, rc = scene.run("--nproc", "1", "--max-generations", "2", script_args=["--generations", "10"])

    assert rc == 0, launch.log_summary()
    assert [g for g, _ in generations(launch)] == [1, 2]
    assert "--max-generations 2 reached (training was not complete)" in launch.event("run_finished")["reason"]
    assert not (scene.work / "PAI" / ".training_complete").exists()


def test_dendrites_past_the_scripts_maximum_are_named_and_max_dendrites_stops_the_run(scene):
    save = make_resumable(scene.work / "PAI", {})
    (save / "PAI_config.json").write_text(json.dumps({"max_dendrites": 1}))
    launch, rc = scene.run("--nproc", "1", "--max-dendrites", "3", script_args=["--generations", "10"])

    assert rc == 0, launch.log_summary()
    past = launch.event("dendrites_past_maximum")
    assert (past["dendrites"], past["max_dendrites"]) == (2, 1), past
    assert "--max-dendrites 3 reached" in launch.event("run_finished")["reason"]
    assert [g for g, _ in generations(launch)] == [1, 2, 3]
    shown = run_tool("status", cwd=scene.work)
    assert "dendrites_past_maximum" in shown.stdout and "max_dendrites 1" in shown.stdout, shown.stdout


def test_in_process_mode_with_a_script_that_exits_at_restructures_says_so_once(scene):
    launch, rc = scene.run("--nproc", "1", "--restructure", "in-process", script_args=["--generations", "3"])

    assert rc == 0, launch.log_summary()
    (noted,) = launch.events("in_process_unused")
    assert noted["generation"] == 1 and "after_restructure" in noted["hint"], noted
    assert [g for g, _ in generations(launch)] == [1, 2, 3]
    shown = run_tool("status", cwd=scene.work).stdout
    assert "in_process_unused" in shown and "after_restructure" in shown, shown
