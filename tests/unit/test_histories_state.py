"""pai-launch's own state across invocations, played in this process from where the command line hands over: a restart
on the same folder goes on from its state (no second init run, the same run id), --fresh moves the old folder aside
intact, and a completed folder is never written to, whatever the command. (The lock between live processes, kill -9
then a restart, and another command refused on the command line: tests/proc/test_launch_state.py.)"""

from __future__ import annotations

import os
import re

from tests.helpers import tree_state
from tests.scripted_world import Gen, complete, console_events, play, switch

OLD = 1_600_000_000  # a fixed past mtime, so a rewrite (even of identical bytes) shows


def test_a_restart_after_an_exit_skips_the_init_run_even_without_a_switch_file(tmp_path):
    first = play(tmp_path, [Gen()])  # every worker exits 0 with nothing written: no progress
    second = play(tmp_path, [Gen()])

    assert (first.exit_code, second.exit_code) == (5, 5), second.names()
    assert (first.processes.inits, second.processes.inits) == (1, 0)
    assert "init_started" in first.names() and "init_started" not in second.names()
    assert [r.generation for r in first.processes.requests] == [1]
    assert [r.generation for r in second.processes.requests] == [2]
    assert second.event("run_started")["resumed"] is True
    assert first.event("run_started")["run_id"] == second.event("run_started")["run_id"] == second.state()["run_id"]
    assert second.state()["generation"] == 2


def test_fresh_moves_the_old_save_folder_aside_intact_and_starts_over(tmp_path, capsys):
    first = play(tmp_path, [complete()])
    assert first.exit_code == 0, first.names()
    save = tmp_path / "PAI"
    before = {path: entry for path, entry in tree_state(save).items() if path != "."}
    old_run_id = first.state()["run_id"]
    capsys.readouterr()

    second = play(tmp_path, [switch(1), complete()], fresh=True, script_args=("--generations", "2"))

    assert second.exit_code == 0, second.names()
    moved = console_events(capsys)["save_folder_moved_aside"]
    aside = tmp_path / os.path.basename(moved["moved_to"])
    assert re.fullmatch(r"PAI\.\d{8}-\d{6}(\.\d+)?", aside.name), aside.name
    assert {path: entry for path, entry in tree_state(aside).items() if path != "."} == before, "moved, not changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["PAI", aside.name])
    # A new run: the init run again, a new run id, a new fingerprint, completed.
    assert second.processes.inits == 1 and second.names().count("init_started") == 1
    state = second.state()
    assert state["run_id"] != old_run_id and state["fingerprint"]["script_args"][-2:] == ["--generations", "2"]
    assert (save / ".training_complete").is_file() and second.processes.load_folders() == [None, "PAI"]


def test_an_already_complete_save_folder_exits_0_and_is_left_byte_for_byte(tmp_path, capsys):
    save = tmp_path / "PAI"
    save.mkdir()
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    (save / "switch_2.pt").write_bytes(os.urandom(64))
    (save / ".training_complete").write_text("complete")
    for path in [*save.iterdir(), save]:
        os.utime(path, (OLD, OLD))
    before = tree_state(tmp_path)

    played = play(tmp_path, [])

    assert played.exit_code == 0
    said = console_events(capsys)
    assert list(said) == ["already_complete"] and said["already_complete"]["save_folder"] == str(save)
    assert tree_state(tmp_path) == before
    assert (played.processes.inits, played.processes.agents, played.processes.requests) == (0, 0, [])


def test_a_completed_save_folder_is_not_written_to_whatever_the_command(tmp_path, capsys):
    first = play(tmp_path, [complete()])
    assert first.exit_code == 0, first.names()
    before = tree_state(tmp_path)
    assert ".pai-launch" in os.listdir(tmp_path / "PAI")
    capsys.readouterr()

    variants = [
        {},                                                               # the same command
        {"nproc": 1, "script_args": ("--generations", "5")},              # another command
        {"reinit": True, "max_failures": 1, "stall_timeout": 5.0},        # options that would start anew or watch
    ]
    for fields in variants:
        again = play(tmp_path, [], **fields)

        assert again.exit_code == 0, fields
        assert list(console_events(capsys)) == ["already_complete"], fields
        assert tree_state(tmp_path) == before, fields
        assert (again.processes.inits, again.processes.agents) == (0, 0), "nothing was started"
