"""What pai-launch makes of the save folder, with processes: already complete, adopting a folder another pai-launch
holds, resuming an adopted folder with the same command, status and --fresh on it. (Resume, --reinit and adoption
within one run are played as histories in tests/unit/test_histories_save_folder.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import run_tool, safetensors_bytes, tree_state
from tests.proc.launch_files import read_events_file, read_state, wait_event

pytestmark = pytest.mark.timeout(60)

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


def test_adopting_a_folder_another_pai_launch_holds_exits_2_naming_it(scene):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from pai_launch.savefmt.locks import "
         "SaveFolderLock\n"
         "SaveFolderLock(Path(sys.argv[1])).acquire(); print('held', flush=True); sys.stdin.read()",
         str(scene.work / "OTHER")],
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


# --- an adopted folder, resumed ------------------------------------------------------------------------------------
#: A script that saves under its own option and clears its folder on a fresh start (its init run), like many do:
#: generation 2 trains until stopped, generation 3 completes (generations are numbered across pai-launch starts).
ADOPTING = ["--save", "runs/exp1", "--init-clears-save", "--generations", "3", "--hang-generation", "2"]
ADOPTED = "runs/exp1"


def _adopt_and_stop(scene):
    """A first run that adopts runs/exp1, then is stopped by SIGTERM while generation 2 trains."""
    first = scene.start("--nproc", "2", "--grace", "10", script_args=ADOPTING)
    scene.wait_ready(2, 2)
    first.send(15)
    assert first.wait(30) == 143, first.log_summary()
    adopted = first.event("save_folder_adopted")
    assert (adopted["save_folder"], adopted["instead_of"]) == (ADOPTED, "PAI")
    return first


def test_the_same_command_resumes_an_adopted_folder_after_a_sigterm_without_the_init_run(scene):
    first = _adopt_and_stop(scene)
    save = scene.work / ADOPTED
    switch = (save / "switch_2.pt").read_bytes()
    before = len(scene.records())

    second, rc = scene.run("--nproc", "2", script_args=ADOPTING)

    assert rc == 0, second.log_summary()
    assert second.event("adopted_folder_used")["save_folder"] == ADOPTED
    names = second.event_names()
    assert "init_started" not in names and "save_folder_adopted" not in names
    assert [(e["generation"], e["load_folder"]) for e in second.events("generation_started")] == [(3, ADOPTED)]
    resumed = scene.records()[before:]
    assert [r["init"] for r in resumed] == [False, False]
    assert all(r["argv"][-2:] == ["--pai_load_folder", ADOPTED] for r in resumed)
    run_ids = {r["env"]["PAI_LAUNCH_RUN_ID"] for r in scene.records()}
    assert run_ids == {first.event("run_started")["run_id"]}  # one run id across both starts
    assert (save / "switch_2.pt").read_bytes() == switch  # the init run did not clear the folder again
    assert (save / ".training_complete").is_file()
    assert read_state(save)["last_exit"]["code"] == 0
    assert [e["event"] for e in read_events_file(save)].count("run_started") == 2
    assert not (scene.work / "PAI").exists()


def test_the_same_command_after_completion_says_already_complete_and_changes_nothing(scene):
    _adopt_and_stop(scene)
    done, rc = scene.run("--nproc", "2", script_args=ADOPTING)
    assert rc == 0, done.log_summary()
    save = scene.work / ADOPTED
    before, records = tree_state(scene.work), len(scene.records())

    again, rc = scene.run("--nproc", "2", script_args=ADOPTING, timeout=30)

    assert rc == 0, again.log_summary()
    assert again.event("already_complete")["save_folder"] == str(save)
    assert "run_started" not in again.event_names()
    assert tree_state(scene.work) == before and len(scene.records()) == records


def test_status_without_an_argument_reports_the_adopted_run(scene):
    first = _adopt_and_stop(scene)

    shown = run_tool("status", "--json", cwd=scene.work)

    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["save"] == str(scene.work / ADOPTED)
    assert status["run_id"] == first.event("run_started")["run_id"]
    assert (status["state"], status["exit_code"]) == ("finished", 143)
    assert not (scene.work / "PAI").exists()


def test_an_adopted_folder_that_is_gone_is_refused_with_exit_2_starting_nothing(scene):
    _adopt_and_stop(scene)
    shutil.rmtree(scene.work / "runs")
    records = len(scene.records())

    again, rc = scene.run("--nproc", "2", script_args=ADOPTING, timeout=30)

    assert rc == 2, again.log_summary()
    (line,) = again.stderr.strip().splitlines()
    assert f"adopted the folder {ADOPTED} for this command" in line and "--fresh" in line
    assert len(scene.records()) == records and sorted(os.listdir(scene.work)) == [".pai-launch-adopted.json"]


def test_fresh_moves_an_adopted_folder_aside_and_trains_again_there(scene):
    _adopt_and_stop(scene)

    again = scene.start("--nproc", "2", "--grace", "10", "--fresh", script_args=ADOPTING)
    wait_event(again, "generation_started", 60, where=lambda e: e["generation"] == 2)
    again.send(15)

    assert again.wait(30) == 143, again.log_summary()
    assert again.event("save_folder_moved_aside")["save_folder"] == str(scene.work / ADOPTED)
    assert again.event_names().count("init_started") == 1
    assert "save_folder_adopted" not in again.event_names()  # the script saves where this command now expects
    assert [p.name.startswith("exp1.") for p in (scene.work / "runs").iterdir()].count(True) == 1
    assert not (scene.work / "PAI").exists()
