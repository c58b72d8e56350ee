"""The whole supervisor in this process against scripted histories (tests/scripted_world.py): what it decides and
says when a generation restructures, completes, fails, dies or leaves a torn checkpoint, with no process started."""

from __future__ import annotations

from pathlib import Path

from pai_launch.core import exitcodes
from tests.helpers import json_events
from tests.scripted_world import Gen, complete, play, switch, torn


def test_a_run_restructures_twice_and_completes_resuming_each_generation_from_the_save_folder(tmp_path):
    played = play(tmp_path, [switch(2), switch(4), complete()])

    assert played.exit_code == 0, played.names()
    assert played.processes.inits == 1
    assert played.processes.load_folders() == [None, "PAI", "PAI"]
    added = [event["switch_files"] for event in played.all("dendrites_added")]
    assert added == [["switch_2.pt"], ["switch_4.pt"]]
    assert played.event("run_finished")["reason"] == "training complete"
    assert "generation_failed" not in played.names()


def test_a_write_the_watcher_reports_after_its_generation_ended_is_not_taken_for_the_next_generations(tmp_path):
    # On a loaded machine the watcher's thread can report a generation's switch file after the agent's result: the
    # next generation has begun by then, and the write is not its own (nor its first training write).
    played = play(tmp_path, [switch(2), switch(4), complete()], lagging_watcher=True)

    assert played.exit_code == 0, played.names()
    written = [(event["file"], event["generation"]) for event in played.all("switch_written")]
    assert all(file == f"switch_{2 * generation}.pt" for file, generation in written), written
    assert played.all("training_reached") == []  # every generation's writes were seen only after it ended


def test_a_failed_rank_is_retried_from_the_last_switch_file_and_counted_once(tmp_path):
    played = play(tmp_path, [switch(2), Gen(failures=((1, 1, "ValueError: rank 1 broke"),)), switch(4), complete()])

    assert played.exit_code == 0, played.names()
    failed = played.all("generation_failed")
    assert [(event["generation"], event["rank"], event["log_line"]) for event in failed] == [(2, 1, "ValueError: rank 1 broke")]
    assert [event["failures"] for event in played.all("retry_scheduled")] == [1]
    assert played.processes.load_folders() == [None, "PAI", "PAI", "PAI"]
    assert played.processes.agents == 1  # a worker's failure leaves the agent running: the retry reuses it


def test_a_torn_switch_file_is_moved_aside_not_deleted_and_the_retry_starts_after_the_init_run(tmp_path):
    played = play(tmp_path, [Gen(writes=(("switch_2.pt", torn()),)), switch(2), complete()])

    assert played.exit_code == 0, played.names()
    assert "wrote no usable switch file" in played.event("generation_failed")["error"]
    moved = Path(played.event("checkpoint_quarantined")["moved_to"])
    assert moved.is_file() and len(moved.read_bytes()) == len(torn())  # kept, byte for byte, beside the save folder
    assert played.processes.load_folders() == [None, None, "PAI"]


def test_an_agent_that_dies_without_a_result_is_replaced_and_the_generation_retried(tmp_path):
    played = play(tmp_path, [switch(2), Gen(agent_dies=1), switch(4), complete()])

    assert played.exit_code == 0, played.names()
    assert played.event("generation_failed")["error"] == "agent process ended with exit code 1 before reporting a result"
    assert played.processes.agents == 2
    assert played.processes.load_folders() == [None, "PAI", "PAI", "PAI"]


def test_every_worker_exiting_0_without_progress_ends_the_run_at_once_with_its_own_code(tmp_path):
    played = play(tmp_path, [Gen()])

    assert played.exit_code == exitcodes.NO_PROGRESS
    assert "the script made no progress" in played.event("run_finished")["reason"]
    assert len(played.processes.requests) == 1  # no spinning: one generation, not a loop of them


def test_failures_without_progress_give_up_after_max_failures(tmp_path):
    played = play(tmp_path, [Gen(failures=((0, 1, f"boom {n}"),)) for n in range(5)], max_failures=3)

    assert played.exit_code == exitcodes.BUDGET_EXHAUSTED
    assert len(played.processes.requests) == 3
    assert "gave up after 3 consecutive failed generation(s)" in played.event("run_finished")["reason"]


def test_an_init_run_that_rejects_the_init_flag_starts_no_generation_and_names_the_fix(tmp_path, capfd):
    played = play(tmp_path, [], init_exit=(2, "train.py: error: unrecognized arguments: --perforate_model_parallel"))

    assert played.exit_code == exitcodes.INIT_FAILED and played.processes.requests == []
    assert not (tmp_path / "PAI").exists()  # the init run wrote nothing: no folder is made for it
    events = {event["event"]: event for event in json_events(capfd.readouterr().err)}
    assert "--perforate_model_parallel" in events["init_output_tail"]["fix"]
    assert 'add parser.add_argument("--perforate_model_parallel"' in events["run_finished"]["reason"]


def test_an_agent_that_leaves_before_taking_its_request_is_replaced_and_named_and_no_failure_is_counted(tmp_path):
    played = play(tmp_path, [switch(2), Gen(agent_leaves=(1, "its forkserver could not start")), switch(4), complete()])

    assert played.exit_code == 0, played.names()
    first_agent = played.all("generation_started")[0]["agent_pid"]
    replaced = played.event("agent_replaced")
    assert (replaced["agent_pid"], replaced["exit"], replaced["reason"]) == (first_agent, "exit code 1",
                                                                           "its forkserver could not start")
    assert replaced["new_agent_pid"] == played.event("generation_started")["agent_pid"] != first_agent
    assert played.processes.agents == 2
    assert "generation_failed" not in played.names() and "retry_scheduled" not in played.names()
    assert [r.generation for r in played.processes.requests] == [1, 2, 2, 3]  # the request handed back, run as it was
