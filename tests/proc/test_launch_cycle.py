"""The restart loop end to end: init run, generations, and how a generation's end decides the exit code."""

from __future__ import annotations

import pytest

from pai_launch.status import gather

pytestmark = pytest.mark.timeout(90)


def _generations(launch):
    return [(event["generation"], event["load_folder"]) for event in launch.events("generation_started")]


def test_full_cycle_restarts_on_each_switch_file_until_the_marker(scene):
    launch, rc = scene.run("--nproc", "2", "--grace", "3", script_args=["--generations", "3"])

    assert rc == 0, launch.log_summary()
    save = scene.work / "PAI"
    assert (save / ".training_complete").is_file()
    assert (save / "switch_2.pt").is_file() and (save / "switch_4.pt").is_file()
    assert launch.event_names().count("init_started") == 1
    assert _generations(launch) == [(1, None), (2, "PAI"), (3, "PAI")]
    assert [e["switch_files"] for e in launch.events("generation_ended")] == [["switch_2.pt"], ["switch_4.pt"], []]
    assert [(e["generation"], e["file"]) for e in launch.events("switch_written")] == [(1, "switch_2.pt"), (2, "switch_4.pt")]
    added = launch.events("dendrites_added")
    assert [(e["generation"], e["switch_files"], e["dendrites"]) for e in added] == [
        (1, ["switch_2.pt"], 1), (2, ["switch_4.pt"], 2)]
    assert "dendrites_rejected" not in launch.event_names()
    finished = launch.event("run_finished")
    assert (finished["exit_code"], finished["generations"]) == (0, 3)

    records = scene.records()
    init, workers = records[0], records[1:]
    assert init["init"] and init["argv"][0] == "--perforate_model_parallel"
    assert init["env"]["PAI_LAUNCH_GENERATION"] == "0" and init["env"]["RANK"] is None
    by_generation = {}
    for record in workers:
        by_generation.setdefault(int(record["env"]["PAI_LAUNCH_GENERATION"]), []).append(record)
    assert sorted(by_generation) == [1, 2, 3]
    for generation, group in by_generation.items():
        assert sorted(int(r["env"]["RANK"]) for r in group) == [0, 1], generation
        for record in group:
            assert record["env"]["WORLD_SIZE"] == "2"
            assert "--perforate_model_parallel" not in record["argv"]
            if generation == 1:
                assert "--pai_load_folder" not in record["argv"]
            else:
                assert record["argv"][-2:] == ["--pai_load_folder", "PAI"], record["argv"]
    run_ids = {record["env"]["PAI_LAUNCH_RUN_ID"] for record in records}
    assert run_ids == {finished["run_id"]} and None not in run_ids
    assert {event["run_id"] for event in launch.events()} == run_ids
    assert all(record["stdin_devnull"] for record in records)
    assert all(record["cwd"] == str(scene.work) for record in records)
    # Worker output reaches pai-launch's stdout; its temporary per-rank log folder is removed at the end.
    assert "rank 1 generation 3 load=PAI" in launch.stdout
    assert scene.tmp_listing() == []


def test_rewriting_the_same_switch_file_counts_as_progress(scene):
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "3", "--rewrite-switch"])

    assert rc == 0, launch.log_summary()
    assert [e["switch_files"] for e in launch.events("generation_ended")] == [["switch_2.pt"], ["switch_2.pt"], []]
    assert _generations(launch) == [(1, None), (2, "PAI"), (3, "PAI")]
    assert sorted(p.name for p in (scene.work / "PAI").glob("switch_*.pt")) == ["switch_2.pt"]
    # The rewrite holds no new dendrite: logged as rejected, once, and the log, status and its generation line agree.
    assert [(e["generation"], e["dendrites"]) for e in launch.events("dendrites_added")] == [(1, 1)]
    assert [(e["generation"], e["dendrites"]) for e in launch.events("dendrites_rejected")] == [(2, 1)]
    shown = gather.gather(scene.work / "PAI")
    assert shown.dendrites.count == 1
    assert [g.outcome for g in shown.generations] == ["restructured", "dendrites rejected", "complete"]


def test_generation_without_switch_file_or_marker_exits_5(scene):
    launch, rc = scene.run("--nproc", "2", script_args=["--no-progress"])

    assert rc == 5, launch.log_summary()
    assert _generations(launch) == [(1, None)]
    finished = launch.event("run_finished")
    assert finished["exit_code"] == 5 and "no progress" in finished["reason"]
    assert not (scene.work / "PAI" / ".training_complete").exists()


@pytest.mark.parametrize("peer", ["peer_finishes", "peer_still_running"])
def test_identical_worker_failure_before_training_is_retried_once_then_exits_with_its_code(scene, peer):
    # The rank fails before writing anything to the save folder, the same way twice: pai-launch retries once,
    # then stops with the worker's own code, naming the rank and showing its log tail.
    # peer_still_running: torch stops rank 0 (which exits 143 from its SIGTERM handler) in the same second;
    # rank 1's 7 is still the root cause.
    # peer_finishes: rank 0 exits 0 without writing a switch file (one would be progress, and progress is retried).
    extra = ["--hang-rank", "0"] if peer == "peer_still_running" else ["--no-progress"]
    launch, rc = scene.run("--nproc", "2", "--grace", "3", "--backoff", "0.2",
                           script_args=["--fail-rank", "1", "--fail-code", "7", "--fail-every", *extra])

    assert rc == 7, launch.log_summary()
    failed = launch.events("generation_failed")
    assert [(f["rank"], f["exit"], f["generation"], f["reached_training"]) for f in failed] == [
        (1, "exit code 7", 1, False), (1, "exit code 7", 2, False)]
    if peer == "peer_still_running":
        assert all(f["failed_ranks"] == [1, 0] for f in failed), failed
    tails = launch.events("worker_log_tail")
    assert [t["rank"] for t in tails] == [1, 1]
    assert all("rank 1 failing on purpose with 7" in t["tail"] for t in tails)
    (retry,) = launch.events("retry_scheduled")
    assert (retry["delay_s"], retry["failures"]) == (0.2, 1) and "rank 1" in retry["reason"]
    finished = launch.event("run_finished")
    assert finished["exit_code"] == 7 and "rank 1" in finished["reason"] and "retrying cannot help" in finished["reason"]
    assert _generations(launch) == [(1, None), (2, None)]


def test_worker_failure_with_max_failures_1_exits_4_naming_the_rank_and_its_code(scene):
    launch, rc = scene.run("--nproc", "2", "--grace", "3", "--max-failures", "1",
                           script_args=["--fail-rank", "1", "--fail-code", "7"])

    assert rc == 4, launch.log_summary()
    failed = launch.event("generation_failed")
    assert (failed["rank"], failed["exit"], failed["generation"]) == (1, "exit code 7", 1)
    assert "rank 1 failing on purpose with 7" in launch.event("worker_log_tail")["tail"]
    finished = launch.event("run_finished")
    assert finished["exit_code"] == 4
    assert "rank 1" in finished["reason"] and "exit code 7" in finished["reason"]
    assert "retry_scheduled" not in launch.event_names()
    assert _generations(launch) == [(1, None)]


def test_worker_killed_by_a_signal_exits_128_plus_the_signal(scene):
    launch, rc = scene.run("--nproc", "2", "--grace", "3", "--backoff", "0.2",
                           script_args=["--fail-rank", "1", "--fail-signal", "9", "--hang-rank", "0", "--fail-every"])

    assert rc == 128 + 9, launch.log_summary()
    failed = launch.events("generation_failed")
    assert [(f["rank"], f["exit"]) for f in failed] == [(1, "signal SIGKILL")] * 2
    assert all("rank 1 killing itself with signal 9" in t["tail"] for t in launch.events("worker_log_tail"))
    assert "signal SIGKILL" in launch.event("run_finished")["reason"]


def test_init_run_failure_exits_3_with_its_output_tail_and_starts_no_workers(scene):
    launch, rc = scene.run("--nproc", "2", script_args=["--fail-init", "4"])

    assert rc == 3, launch.log_summary()
    assert launch.event("init_exited")["exit"] == "exit code 4"
    assert "init run failing on purpose" in launch.event("init_output_tail")["tail"]
    assert "init run failing on purpose" in launch.stdout  # the init run's output is passed through
    assert "generation_started" not in launch.event_names()
    assert [record["init"] for record in scene.records()] == [True]
    assert launch.event("run_finished")["exit_code"] == 3


def test_init_run_that_writes_no_array_dims_exits_3(scene, tmp_path):
    script = tmp_path / "io" / "no_outputs.py"
    script.write_text("print('init without save_tracker_settings')\n")
    launch, rc = scene.run("--nproc", "2", script=script, instrument=False)

    assert rc == 3, launch.log_summary()
    assert "array_dims.csv" in launch.event("run_finished")["reason"]
    assert "generation_started" not in launch.event_names()
