"""The whole supervisor in this process against scripted histories (tests/scripted_world.py): what it decides and
says when a generation restructures, completes, fails, dies or leaves a torn checkpoint, with no process started."""

from __future__ import annotations

import signal
from pathlib import Path

from pai_launch.core import exitcodes
from pai_launch.status import gather
from tests.helpers import json_events
from tests.scripted_world import Gen, checkpoint, complete, play, switch, torn


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
    assert [(event["generation"], event["rank"], event["log_line"])
            for event in failed] == [(2, 1, "ValueError: rank 1 broke")]
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
    assert played.event("generation_failed")["error"] == \
        "agent process ended with exit code 1 before reporting a result"
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


def test_rewriting_the_same_switch_file_counts_as_progress_and_its_dendrites_as_rejected(tmp_path):
    played = play(tmp_path, [switch(2), switch(2), complete()])

    assert played.exit_code == 0, played.names()
    assert [e["switch_files"] for e in played.all("generation_ended")] == [["switch_2.pt"], ["switch_2.pt"], []]
    assert played.processes.load_folders() == [None, "PAI", "PAI"]
    # The rewrite holds no new dendrite: logged as rejected, once, and status agrees.
    assert [(e["generation"], e["dendrites"]) for e in played.all("dendrites_added")] == [(1, 1)]
    assert [(e["generation"], e["dendrites"]) for e in played.all("dendrites_rejected")] == [(2, 1)]
    shown = gather.gather(tmp_path / "PAI")
    assert shown.dendrites.count == 1
    assert [g.outcome for g in shown.generations] == ["restructured", "dendrites rejected", "complete"]


def test_an_identical_failure_before_training_beside_a_peer_that_finished_is_retried_once_then_exits_with_its_code(
        tmp_path):
    # Rank 1 fails before writing anything, the same way twice; rank 0 exits 0 without a switch file.
    played = play(tmp_path, [Gen(failures=((1, 7, "rank 1 failing on purpose with 7"),))] * 3, backoff=0.2,
                  backoff_max=0.2)

    assert played.exit_code == 7, played.names()
    failed = played.all("generation_failed")
    assert [(f["rank"], f["exit"], f["generation"], f["reached_training"]) for f in failed] == [
        (1, "exit code 7", 1, False), (1, "exit code 7", 2, False)]
    assert [t["rank"] for t in played.all("worker_log_tail")] == [1, 1]
    (retry,) = played.all("retry_scheduled")
    assert (retry["delay_s"], retry["failures"]) == (0.2, 1) and "rank 1" in retry["reason"]
    finished = played.event("run_finished")
    assert "rank 1" in finished["reason"] and "retrying cannot help" in finished["reason"]
    assert played.processes.load_folders() == [None, None]


def test_a_worker_failure_with_max_failures_1_exits_4_naming_the_rank_and_its_code(tmp_path):
    played = play(tmp_path, [Gen(failures=((1, 7, "rank 1 failing on purpose with 7"),))], max_failures=1)

    assert played.exit_code == exitcodes.BUDGET_EXHAUSTED, played.names()
    failed = played.event("generation_failed")
    assert (failed["rank"], failed["exit"], failed["generation"]) == (1, "exit code 7", 1)
    finished = played.event("run_finished")
    assert "rank 1" in finished["reason"] and "exit code 7" in finished["reason"]
    assert "retry_scheduled" not in played.names()
    assert len(played.processes.requests) == 1


def test_a_worker_killed_by_a_signal_makes_the_run_exit_128_plus_the_signal(tmp_path):
    killed = Gen(failures=((1, -signal.SIGKILL, "rank 1 killing itself with signal 9"),))
    played = play(tmp_path, [killed, killed, killed], backoff=0.01, backoff_max=0.01)

    assert played.exit_code == 128 + signal.SIGKILL, played.names()
    assert [(f["rank"], f["exit"]) for f in played.all("generation_failed")] == [(1, "signal SIGKILL")] * 2
    assert "signal SIGKILL" in played.event("run_finished")["reason"]


def test_an_init_run_that_exits_0_without_writing_its_settings_exits_3_and_starts_no_generation(tmp_path, capfd):
    played = play(tmp_path, [], init_writes=False)

    assert played.exit_code == exitcodes.INIT_FAILED and played.processes.requests == []
    events = {event["event"]: event for event in json_events(capfd.readouterr().err)}
    assert "array_dims.csv" in events["run_finished"]["reason"]


def test_the_polling_watcher_sees_the_marker_and_ends_workers_that_linger_after_it(tmp_path):
    # Rank 0 writes the marker and its workers go on: the run can only end with 0 if the polling watcher saw it.
    lingering = Gen(writes=((".training_complete", b"complete"),), hangs=True)
    played = play(tmp_path, [switch(1), lingering], poll=True, grace=0.5)

    assert played.exit_code == 0, played.names()
    assert [r.generation for r in played.processes.requests] == [1, 2]
    assert played.event("completion_marker_seen")["generation"] == 2
    assert "grace" in played.event("run_finished")["reason"]
    assert {name for _, _, name, _ in played.processes.signals} >= {"SIGTERM"}


def test_training_reached_is_said_once_per_generation_at_its_first_training_write(tmp_path):
    trains = Gen(writes=(("switch_1.pt", checkpoint()),), trains_for=0.3, heartbeat=0.1)
    last = Gen(writes=((".training_complete", b"complete"),), trains_for=0.3, heartbeat=0.1)
    played = play(tmp_path, [trains, last])

    assert played.exit_code == 0, played.names()
    reached = played.all("training_reached")
    assert [e["generation"] for e in reached] == [1, 2]
    assert reached[0]["after_s"] >= 0 and played.names().index("training_reached") < played.names().index(
        "generation_ended")
    assert played.event("completion_marker_seen")["generation"] == 2
