"""Switch files the script wrote but no resume can use, over whole histories in this process: a text file is moved
aside before the start; a whole file no rank can load is moved aside after the ranks failed on it, and the one before
resumed; a script whose every switch file is garbage, or unloadable, spends its budget. (pai-launch's own files in the
save folder refused or moved aside, with processes: tests/proc/test_launch_own_files.py.)"""

from __future__ import annotations

import os

from pai_launch.core import exitcodes
from tests.helpers import safetensors_bytes
from tests.scripted_world import Gen, complete, play, switch

GARBAGE = b"not a checkpoint: " + b"text " * 20 + b"\n"


def unloadable() -> bytes:
    """A whole safetensors file the model cannot load (every rank resuming from it fails)."""
    return safetensors_bytes(os.urandom(64), {"__metadata__": {"unloadable": "yes"}})


def resumable(save, switches: dict[int, bytes]) -> None:
    save.mkdir()
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    for number, content in switches.items():
        (save / f"switch_{number}.pt").write_bytes(content)


def quarantined(save) -> list[bytes]:
    folder = save / ".pai-launch" / "quarantine"
    return [path.read_bytes() for path in sorted(folder.iterdir())] if folder.is_dir() else []


def test_a_text_file_as_the_newest_switch_file_is_quarantined_and_the_one_before_is_loaded(tmp_path):
    text = b"this is not a checkpoint, just a text file\n"
    resumable(tmp_path / "PAI", {2: safetensors_bytes(os.urandom(64)), 4: text})

    played = play(tmp_path, [switch(4), complete()])

    assert played.exit_code == 0, played.names()
    event = played.event("checkpoint_quarantined")
    assert event["file"] == "switch_4.pt" and "not a checkpoint" in event["problem"]
    assert quarantined(tmp_path / "PAI") == [text]
    assert played.processes.load_folders() == ["PAI", "PAI"]
    assert "generation_failed" not in played.names()


def test_a_whole_switch_file_that_no_rank_can_load_is_moved_aside_and_the_one_before_is_resumed(tmp_path):
    bad = unloadable()
    resumable(tmp_path / "PAI", {2: safetensors_bytes(os.urandom(64)), 4: bad})

    played = play(tmp_path, [Gen(), switch(4), complete()], backoff=0.05)

    assert played.exit_code == 0, played.names()
    failed = played.event("generation_failed")
    assert failed["generation"] == 1 and sorted(failed["failed_ranks"]) == [0, 1]
    retry = played.event("retry_scheduled")
    assert "switch_4.pt cannot be loaded (rank" in retry["reason"]
    assert "Error(s) in loading state_dict" in retry["reason"]
    assert "it is moved aside" in retry["reason"]
    moved = played.event("checkpoint_quarantined")
    assert moved["file"] == "switch_4.pt" and "generation 1 could not load it" in moved["problem"]
    assert quarantined(tmp_path / "PAI") == [bad]
    assert played.processes.load_folders() == ["PAI", "PAI", "PAI"]


def test_a_script_whose_every_switch_file_is_garbage_ends_with_exit_4(tmp_path):
    garbage = [Gen(writes=((f"switch_{2 * n}.pt", GARBAGE),)) for n in range(1, 4)]
    played = play(tmp_path, garbage, backoff=0.05, max_failures=3)

    assert played.exit_code == exitcodes.BUDGET_EXHAUSTED, played.names()
    finished = played.event("run_finished")
    assert "gave up after 3 consecutive failed generation(s)" in finished["reason"]
    assert "wrote no usable switch file" in finished["reason"] and "not a checkpoint" in finished["reason"]
    assert len(played.processes.requests) == 3
    assert len(quarantined(tmp_path / "PAI")) == 2, "each earlier generation's file was moved aside, never deleted"


def test_a_script_whose_every_switch_file_no_rank_can_load_ends_with_exit_4(tmp_path):
    # Odd generations start over and write a switch file (progress, never revoked); even ones cannot load it.
    writes_unloadable = [Gen(writes=((f"switch_{2 * n}.pt", unloadable()),)) for n in range(1, 11)]
    played = play(tmp_path, writes_unloadable, backoff=0.05, max_failures=3)

    assert played.exit_code == exitcodes.BUDGET_EXHAUSTED, played.names()
    reason = played.event("run_finished")["reason"]
    assert "3 switch file(s) the script wrote could not be loaded" in reason, reason
    assert played.processes.load_folders() == [None, "PAI", None, "PAI", None, "PAI"]
    assert [e["file"] for e in played.all("checkpoint_quarantined")] == ["switch_2.pt", "switch_6.pt"]
