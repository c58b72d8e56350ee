"""Switch files the script wrote but no resume can use, over whole histories in this process: a text file is moved
aside before the start; a whole file no rank can load is moved aside after the ranks failed on it, and the one before
resumed; a script whose every switch file is garbage, or unloadable, spends its budget. (pai-launch's own files in the
save folder refused or moved aside, with processes: tests/proc/test_launch_own_files.py.)"""

from __future__ import annotations

import json
import os
import stat

import pytest

from pai_launch.core import exitcodes
from tests.helpers import safetensors_bytes
from tests.scripted_world import Gen, complete, console_events, play, switch

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


# --- pai-launch's own files in SAVE/.pai-launch, opened defensively ---------------------------------------------------
def _own(save) -> object:
    """A resumable save folder with its .pai-launch made (where state.json and events.jsonl go)."""
    resumable(save, {2: safetensors_bytes(os.urandom(64))})
    (save / ".pai-launch").mkdir()
    return save / ".pai-launch"


def _one_error_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("pai-launch: error: "), lines[0]
    return lines[0]


def _moved_aside(own) -> list[str]:
    return sorted(name for name in os.listdir(own) if name.startswith("state.json.bad-"))


def _nothing_started(played) -> bool:
    return (played.processes.inits, played.processes.agents, played.processes.requests) == (0, 0, [])


def test_a_pipe_as_state_json_is_refused_at_once_exit_2_and_moved_aside(tmp_path, capsys):
    own = _own(tmp_path / "PAI")
    os.mkfifo(own / "state.json")

    played = play(tmp_path, [])

    assert played.exit_code == 2
    line = _one_error_line(capsys)
    assert "state.json is a named pipe (FIFO), not a regular file: moved aside to state.json.bad-" in line
    (aside,) = _moved_aside(own)
    assert stat.S_ISFIFO(os.lstat(own / aside).st_mode), "moved, never deleted"
    assert _nothing_started(played)


@pytest.mark.parametrize("kind", ["pipe", "directory"])
def test_events_jsonl_that_is_no_regular_file_is_named_exit_2_and_nothing_is_started(tmp_path, capsys, kind):
    own = _own(tmp_path / "PAI")
    (os.mkfifo if kind == "pipe" else os.mkdir)(own / "events.jsonl")

    played = play(tmp_path, [])

    assert played.exit_code == 2
    line = _one_error_line(capsys)
    what = "a named pipe (FIFO)" if kind == "pipe" else "a directory"
    assert f"events.jsonl is {what}, not a regular file" in line and "permissions" not in line
    assert kind == "directory" or "move it aside" in line
    assert os.path.lexists(own / "events.jsonl") and _nothing_started(played)


def test_a_state_json_with_fields_of_the_wrong_type_is_exit_2_one_line_and_moved_aside(tmp_path, capsys):
    from pai_launch import __version__

    record = {"fingerprint": {"pai_launch": __version__}, "run_id": "R", "save_name": "PAI", "generation": "two",
              "failures": [], "init_done": "yes"}
    text = json.dumps(record)
    own = _own(tmp_path / "PAI")
    (own / "state.json").write_text(text)

    played = play(tmp_path, [])

    assert played.exit_code == 2
    assert "'generation' is \"two\"" in _one_error_line(capsys)
    (aside,) = _moved_aside(own)
    assert (own / aside).read_text() == text and _nothing_started(played)


def test_a_huge_sparse_state_json_is_refused_without_being_read(tmp_path, capsys):
    own = _own(tmp_path / "PAI")
    with open(own / "state.json", "wb") as handle:
        handle.truncate(1536 * 1024 * 1024)

    played = play(tmp_path, [])

    assert played.exit_code == 2
    assert "1610612736 bytes, more than the 16777216 bytes it can be" in _one_error_line(capsys)
    assert len(_moved_aside(own)) == 1 and _nothing_started(played)


def test_a_pipe_as_events_jsonl_found_after_the_init_run_ends_the_run_naming_it(tmp_path, capsys):
    own = tmp_path / "PAI" / ".pai-launch"  # no init outputs yet: the init run comes first
    own.mkdir(parents=True)
    os.mkfifo(own / "events.jsonl")

    played = play(tmp_path, [])

    assert played.exit_code == 6
    said = console_events(capsys)
    reason = said["run_finished"]["reason"]
    assert "events.jsonl is a named pipe (FIFO), not a regular file" in reason and "move it aside" in reason
    assert played.processes.inits == 1 and played.processes.requests == [], "no generation was started"
    assert stat.S_ISFIFO(os.lstat(own / "events.jsonl").st_mode)
