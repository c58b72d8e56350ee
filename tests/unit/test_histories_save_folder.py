"""What the supervisor makes of the save folder, over whole histories in this process: resume, --reinit, an init run's
settings without a switch file, adopting the folder the script really saves to. (Already complete, adoption across
invocations and another pai-launch's folder, with processes: tests/proc/test_launch_save_folder.py.)"""

from __future__ import annotations

import os

from pai_launch.core import exitcodes
from tests.helpers import safetensors_bytes
from tests.scripted_world import complete, play, switch

OLD = 1_600_000_000  # a fixed past mtime, so a rewrite (even of identical bytes) shows


def resumable(save) -> None:
    save.mkdir()
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    (save / "switch_2.pt").write_bytes(safetensors_bytes(os.urandom(64)))
    (save / "latest.pt").write_bytes(os.urandom(32))
    for path in [*save.iterdir(), save]:
        os.utime(path, (OLD, OLD))


def test_resume_skips_the_init_run_and_loads_the_save_folder_in_generation_1(tmp_path):
    resumable(tmp_path / "PAI")

    played = play(tmp_path, [complete()])

    assert played.exit_code == 0, played.names()
    assert played.processes.inits == 0 and "init_started" not in played.names()
    assert [(e["generation"], e["load_folder"]) for e in played.all("generation_started")] == [(1, "PAI")]
    assert played.processes.requests[0].args[-2:] == ("--pai_load_folder", "PAI")


def test_reinit_runs_the_init_run_even_when_the_save_folder_could_resume(tmp_path):
    resumable(tmp_path / "PAI")

    played = play(tmp_path, [complete()], reinit=True)

    assert played.exit_code == 0, played.names()
    assert played.processes.inits == 1 and played.names().count("init_started") == 1
    assert (tmp_path / "PAI" / "array_dims.csv").stat().st_mtime > OLD  # the init run rewrote it


def test_a_save_folder_with_array_dims_but_no_switch_file_runs_the_init_run(tmp_path):
    (tmp_path / "PAI").mkdir()
    (tmp_path / "PAI" / "array_dims.csv").write_text(".fc1,1,32\n")

    played = play(tmp_path, [complete()])

    assert played.exit_code == 0, played.names()
    assert played.processes.inits == 1
    assert played.processes.load_folders() == [None]


def test_the_save_folder_the_script_chose_is_adopted_without_save_name(tmp_path):
    played = play(tmp_path, [switch(2), complete()], script_saves="OTHER")

    assert played.exit_code == 0, played.names()
    adopted = played.event("save_folder_adopted")
    assert (adopted["save_folder"], adopted["instead_of"]) == ("OTHER", "PAI")
    assert (tmp_path / "OTHER" / ".training_complete").is_file() and (tmp_path / "OTHER" / "switch_2.pt").is_file()
    assert not (tmp_path / "PAI").exists()
    assert played.processes.load_folders() == [None, "OTHER"]


def test_a_save_folder_conflicting_with_save_name_exits_2_naming_both_and_starts_no_generation(tmp_path, capfd):
    played = play(tmp_path, [], script_saves="OTHER", adopt_save_folder=False)

    assert played.exit_code == exitcodes.USAGE
    assert played.processes.inits == 1 and played.processes.requests == []
    finished = [line for line in capfd.readouterr().err.splitlines() if '"run_finished"' in line]
    assert finished and "OTHER" in finished[-1] and "PAI" in finished[-1], finished
