"""The command line end to end: preflight errors, script arguments, --dry-run, --log-dir, --poll, --data-parallel."""

from __future__ import annotations

import pytest

from tests.helpers import FAKE_TRAINER

pytestmark = pytest.mark.timeout(60)

PREFLIGHT_ERRORS = {
    "missing_script": (["--nproc", "2"], "missing_train.py", [], "does not exist"),
    "nproc_0": (["--nproc", "0"], None, [], "--nproc 0"),
    "unknown_option_before_script": (["--nproc", "2", "--bogus-option"], None, [], "--bogus-option"),
    "pai_load_folder_in_script_args": (["--nproc", "2"], None, ["--pai_load_folder", "PAI"], "--pai_load_folder"),
    "pai_load_folder_equals_in_script_args": (["--nproc", "2"], None, ["--pai_load_folder=PAI"], "--pai_load_folder"),
    "perforate_flag_in_script_args": (["--nproc", "2"], None, ["--perforate_model_parallel"],
                                      "--perforate_model_parallel"),
    "data_parallel_with_nproc_2": (["--data-parallel", "--nproc", "2"], None, [], "--data-parallel"),
    "negative_grace": (["--nproc", "2", "--grace", "-1"], None, [], "--grace"),
    "unknown_restructure_mode": (["--nproc", "2", "--restructure", "inplace"], None, [], "--restructure 'inplace'"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", PREFLIGHT_ERRORS, ids=list(PREFLIGHT_ERRORS))
def test_preflight_error_is_one_stderr_line_exit_2_and_nothing_started_or_written(scene, case):
    pai_args, script, script_args, mention = PREFLIGHT_ERRORS[case]
    launch, rc = scene.run(*pai_args, script=script or FAKE_TRAINER, script_args=script_args, timeout=20)

    assert rc == 2, launch.stderr
    lines = [line for line in launch.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("pai-launch: error:") and mention in lines[0], lines[0]
    assert launch.stdout == ""
    assert scene.work_listing() == []  # no save folder
    assert scene.records() == [] and scene.tmp_listing() == []


def test_script_arguments_that_look_like_options_reach_the_script(scene):
    # --nproc and --dry-run after SCRIPT are the script's: pai-launch must run 2 workers for real.
    launch, rc = scene.run("--nproc", "2", script_args=["--train-seconds", "0.1", "--nproc", "5", "--dry-run",
                                                        "--generations", "1"])

    assert rc == 0, launch.log_summary()
    records = scene.records()
    assert [r["env"]["PAI_LAUNCH_GENERATION"] for r in records] == ["0", "1", "1"]
    for record in records:
        argv = record["argv"]
        assert argv[argv.index("--train-seconds") + 1] == "0.1"
        assert argv[argv.index("--nproc") + 1] == "5"
        assert "--dry-run" in argv


def test_dry_run_prints_the_plan_and_starts_and_writes_nothing(scene):
    launch, rc = scene.run("--dry-run", "--nproc", "2", script_args=["--train-seconds", "0.1"], timeout=30)

    assert rc == 0, launch.stderr
    out = launch.stdout
    init_lines = [line for line in out.splitlines() if "--perforate_model_parallel" in line]
    assert len(init_lines) == 1 and str(FAKE_TRAINER) in init_lines[0] and "--train-seconds 0.1" in init_lines[0]
    assert "generation 1 (2 workers" in out
    assert scene.records() == [] and scene.ready(0) == {}
    assert scene.work_listing() == []
    assert scene.tmp_listing() == [], "--dry-run must not leave a temporary folder behind"


def test_dry_run_shows_in_process_restructures_and_what_the_workers_are_told(scene):
    launch, rc = scene.run("--dry-run", "--nproc", "2", "--restructure", "in-process", timeout=30)

    assert rc == 0, launch.stderr
    assert "PAI_LAUNCH_RESTRUCTURE=in-process" in launch.stdout
    assert "restructures: in-process (--restructure in-process)" in launch.stdout
    assert "generation 2, 3, ...: same" not in launch.stdout and scene.work_listing() == []


def test_dry_run_on_a_resumable_save_folder_plans_no_init_and_changes_nothing(scene):
    save = scene.work / "PAI"
    save.mkdir()
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    (save / "switch_2.pt").write_bytes(b"x" * 64)
    before = scene.work_listing()
    launch, rc = scene.run("--dry-run", "--nproc", "2", timeout=30)

    assert rc == 0, launch.stderr
    assert "init run: skipped" in launch.stdout
    assert "--pai_load_folder PAI" in launch.stdout
    assert "--perforate_model_parallel" not in launch.stdout
    assert scene.work_listing() == before and scene.records() == []


def test_log_dir_keeps_every_ranks_stdout_and_stderr_for_every_generation(scene, tmp_path):
    logs = tmp_path / "logs"
    launch, rc = scene.run("--nproc", "2", "--log-dir", str(logs), script_args=["--generations", "2"])

    assert rc == 0, launch.log_summary()
    (run,) = logs.iterdir()  # LOGDIR/<run id>/<this start>/generation-N
    assert run.name == launch.event("run_finished")["run_id"]
    (start,) = run.iterdir()
    for generation in (1, 2):
        folder = start / f"generation-{generation}"
        for rank in (0, 1):
            stdouts = list(folder.glob(f"**/{rank}/stdout.log"))
            stderrs = list(folder.glob(f"**/{rank}/stderr.log"))
            assert len(stdouts) == 1 and len(stderrs) == 1, sorted(str(p) for p in folder.rglob("*"))
            assert f"rank {rank} generation {generation}" in stdouts[0].read_text()
    assert sorted(p.name for p in start.iterdir()) == ["generation-1", "generation-2"]


def test_data_parallel_runs_the_init_run_then_one_plain_process(scene):
    launch, rc = scene.run("--data-parallel", script_args=["--generations", "1"])

    assert rc == 0, launch.log_summary()
    init, *training = scene.records()
    assert init["init"] and init["env"]["PAI_LAUNCH_GENERATION"] == "0"
    assert len(training) == 1
    (process,) = training
    assert process["env"]["PAI_LAUNCH_GENERATION"] == "1"
    assert process["env"]["RANK"] is None and process["env"]["WORLD_SIZE"] is None  # no elastic agent
    assert "--pai_load_folder" not in process["argv"] and "--perforate_model_parallel" not in process["argv"]
    assert process["stdin_devnull"]
    assert process["env"]["PAI_LAUNCH_RUN_ID"] == init["env"]["PAI_LAUNCH_RUN_ID"] == \
        launch.event("run_finished")["run_id"]
    assert "generation_started" not in launch.event_names()
    assert launch.event("training_started")["mode"] == "data_parallel"
    assert (scene.work / "PAI" / ".training_complete").is_file()
