"""What pai-launch makes of the save folder: resume, --reinit, already complete, and adopting the folder the
script really saves to."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import safetensors_bytes, tree_state

pytestmark = [pytest.mark.proc, pytest.mark.timeout(60)]

OLD = 1_600_000_000  # a fixed past mtime, so a rewrite (even of identical bytes) shows


def _resumable(scene, *, complete: bool = False):
    save = scene.work / "PAI"
    save.mkdir()
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    (save / "switch_2.pt").write_bytes(safetensors_bytes(os.urandom(64)))
    (save / "latest.pt").write_bytes(os.urandom(32))
    if complete:
        (save / ".training_complete").write_text("complete")
    for path in [*save.iterdir(), save]:
        os.utime(path, (OLD, OLD))
    return save


def test_resume_skips_the_init_run_and_loads_the_save_folder_in_generation_1(scene):
    _resumable(scene)
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"])

    assert rc == 0, launch.log_summary()
    assert "init_started" not in launch.event_names()
    assert [(e["generation"], e["load_folder"]) for e in launch.events("generation_started")] == [(1, "PAI")]
    records = scene.records()
    assert not [r for r in records if r["init"]]
    assert len(records) == 2
    for record in records:
        assert record["argv"][-2:] == ["--pai_load_folder", "PAI"]
        assert record["env"]["PAI_LAUNCH_GENERATION"] == "1"


def test_reinit_runs_the_init_run_even_when_the_save_folder_could_resume(scene):
    _resumable(scene)
    launch, rc = scene.run("--nproc", "2", "--reinit", script_args=["--generations", "1"])

    assert rc == 0, launch.log_summary()
    assert launch.event_names().count("init_started") == 1
    assert [r["env"]["PAI_LAUNCH_GENERATION"] for r in scene.records()] == ["0", "1", "1"]
    assert (scene.work / "PAI" / "array_dims.csv").stat().st_mtime > OLD  # the init run rewrote it


def test_save_folder_with_array_dims_but_no_switch_file_runs_the_init_run(scene):
    save = scene.work / "PAI"
    save.mkdir()
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"])

    assert rc == 0, launch.log_summary()
    assert launch.event_names().count("init_started") == 1
    assert [(e["generation"], e["load_folder"]) for e in launch.events("generation_started")] == [(1, None)]


def test_already_complete_save_folder_exits_0_and_is_left_byte_for_byte(scene):
    save = _resumable(scene, complete=True)
    before = tree_state(save)
    launch, rc = scene.run("--nproc", "2", timeout=30)

    assert rc == 0, launch.stderr
    event = launch.event("already_complete")
    assert event["save_folder"] == str(save)
    assert "run_started" not in launch.event_names()
    assert tree_state(save) == before
    assert scene.records() == [] and scene.tmp_listing() == []
    assert scene.work_listing() == ["PAI", *[f"PAI/{name}" for name in sorted(os.listdir(save))]]


def test_save_folder_the_script_chose_is_adopted_without_save_name(scene):
    launch, rc = scene.run("--nproc", "2", script_args=["--save", "OTHER", "--generations", "2"])

    assert rc == 0, launch.log_summary()
    adopted = launch.event("save_folder_adopted")
    assert (adopted["save_folder"], adopted["instead_of"]) == ("OTHER", "PAI")
    assert (scene.work / "OTHER" / ".training_complete").is_file()
    assert (scene.work / "OTHER" / "switch_2.pt").is_file()
    assert not (scene.work / "PAI").exists()
    assert [(e["generation"], e["load_folder"]) for e in launch.events("generation_started")] == [(1, None), (2, "OTHER")]


def test_save_folder_conflicting_with_save_name_exits_2_naming_both(scene):
    launch, rc = scene.run("--nproc", "2", "--save-name", "PAI", script_args=["--save", "OTHER"])

    assert rc == 2, launch.log_summary()
    reason = launch.event("run_finished")["reason"]
    assert "OTHER" in reason and "PAI" in reason
    assert "generation_started" not in launch.event_names()
    assert [r["init"] for r in scene.records()] == [True]


def test_adopting_a_folder_another_pai_launch_holds_exits_2_naming_it(scene):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from pai_launch.locks import SaveFolderLock\n"
         "SaveFolderLock(Path(sys.argv[1])).acquire(); print('held', flush=True); sys.stdin.read()", str(scene.work / "OTHER")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        launch, rc = scene.run("--nproc", "2", script_args=["--save", "OTHER"])
    finally:
        holder.communicate("", timeout=10)

    assert rc == 2, launch.log_summary()
    reason = launch.event("run_finished")["reason"]
    assert f"the script saves to OTHER, but another pai-launch (PID {holder.pid})" in reason
    assert "generation_started" not in launch.event_names()
    assert not (scene.work / "PAI").exists()  # nothing written where the script never writes
