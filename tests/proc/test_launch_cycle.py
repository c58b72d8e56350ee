"""The restart loop end to end: init run, generations, and how a generation's end decides the exit code."""

from __future__ import annotations

import pytest

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
    assert [(e["generation"], e["file"]) for e in launch.events("switch_written")] == [(1, "switch_2.pt"),
                                                                                       (2, "switch_4.pt")]
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


def test_identical_worker_failure_before_training_is_retried_once_then_exits_with_its_code(scene):
    # The rank fails before writing anything to the save folder, the same way twice: pai-launch retries once,
    # then stops with the worker's own code, naming the rank and showing its log tail. Torch stops rank 0 (which
    # exits 143 from its SIGTERM handler) in the same second; rank 1's 7 is still the root cause. (Beside a peer that
    # finished, and the other ends of a generation: tests/unit/test_histories.py.)
    extra = ["--hang-rank", "0"]
    launch, rc = scene.run("--nproc", "2", "--grace", "3", "--backoff", "0.2",
                           script_args=["--fail-rank", "1", "--fail-code", "7", "--fail-every", *extra])

    assert rc == 7, launch.log_summary()
    failed = launch.events("generation_failed")
    assert [(f["rank"], f["exit"], f["generation"], f["reached_training"]) for f in failed] == [
        (1, "exit code 7", 1, False), (1, "exit code 7", 2, False)]
    assert all(f["failed_ranks"] == [1, 0] for f in failed), failed
    tails = launch.events("worker_log_tail")
    assert [t["rank"] for t in tails] == [1, 1]
    assert all("rank 1 failing on purpose with 7" in t["tail"] for t in tails)
    (retry,) = launch.events("retry_scheduled")
    assert (retry["delay_s"], retry["failures"]) == (0.2, 1) and "rank 1" in retry["reason"]
    finished = launch.event("run_finished")
    assert finished["exit_code"] == 7 and "rank 1" in finished["reason"] \
        and "retrying cannot help" in finished["reason"]
    assert _generations(launch) == [(1, None), (2, None)]


def test_init_run_failure_exits_3_with_its_output_tail_and_starts_no_workers(scene):
    launch, rc = scene.run("--nproc", "2", script_args=["--fail-init", "4"])

    assert rc == 3, launch.log_summary()
    assert launch.event("init_exited")["exit"] == "exit code 4"
    assert "init run failing on purpose" in launch.event("init_output_tail")["tail"]
    assert "init run failing on purpose" in launch.stdout  # the init run's output is passed through
    assert "generation_started" not in launch.event_names()
    assert [record["init"] for record in scene.records()] == [True]
    assert launch.event("run_finished")["exit_code"] == 3