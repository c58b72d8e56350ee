"""The save session's folder on a real file system: nothing written before the init run is over, taken once the script
made it, a run's end recorded in a folder the script made again, and what a removal's message says; the events file
carried along."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pai_launch.core.state import Phase, State
from pai_launch.placement.spec import LaunchSpec
from pai_launch.supervise.folder.savefolder import INIT_RUN, removed_message
from pai_launch.supervise.folder.session import SaveSession
from pai_launch.supervise.outputs.logs import EventsFile
from tests.helpers import FAKE_TRAINER


def _spec(workdir: Path) -> LaunchSpec:
    return LaunchSpec(script=FAKE_TRAINER, workdir=workdir, python=sys.executable, nproc=2)


def _log(events: EventsFile, name: str) -> None:
    events(None, "info", {"event": name})


def _names(path: Path) -> list[str]:
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


def test_events_kept_in_memory_go_into_the_file_placed_later(tmp_path):
    events = EventsFile(None)
    _log(events, "run_started")
    _log(events, "init_started")
    events.place(tmp_path / "events.jsonl")
    _log(events, "init_exited")
    events.close()
    assert _names(tmp_path / "events.jsonl") == ["run_started", "init_started", "init_exited"]


def test_events_move_with_their_file_or_are_copied_from_it_when_its_folder_was_removed(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    events = EventsFile(tmp_path / "a" / "events.jsonl")
    _log(events, "one")
    events.place(tmp_path / "b" / "events.jsonl")  # adoption: the file is moved
    assert not (tmp_path / "a" / "events.jsonl").exists()
    _log(events, "two")
    os.rename(tmp_path / "b", tmp_path / "gone")
    os.unlink(tmp_path / "gone" / "events.jsonl")  # removed with its folder; our handle still reads it
    (tmp_path / "b").mkdir()
    events.place(tmp_path / "b" / "events.jsonl")
    _log(events, "three")
    events.close()
    assert _names(tmp_path / "b" / "events.jsonl") == ["one", "two", "three"]


def test_a_session_before_its_init_run_writes_nothing_and_takes_the_folder_the_script_made(tmp_path):
    spec = _spec(tmp_path)
    session = SaveSession(spec, {})
    session.acquire(defer=True)
    try:
        assert session.record(State(save_name="PAI")) is None
        assert not spec.save_dir.exists()

        spec.save_dir.mkdir()  # the init run makes it
        (spec.save_dir / "array_dims.csv").write_text(".fc1,1,32\n")
        assert session.take() is None
        assert session.record(State(save_name="PAI")) is None
        assert sorted(os.listdir(spec.save_dir / ".pai-launch")) == ["events.jsonl", "lock.node0", "state.json"]
    finally:
        session.close()


def test_a_run_that_ends_in_a_folder_made_again_records_its_end_there_but_not_in_an_empty_one(tmp_path):
    spec = _spec(tmp_path)
    spec.save_dir.mkdir()
    session = SaveSession(spec, {})
    session.acquire()
    try:
        os.rename(spec.save_dir, tmp_path / "gone")
        spec.save_dir.mkdir()  # made again by someone, empty
        done = State(save_name="PAI", phase=Phase.DONE, exit_code=6, reason="removed")
        assert session.record(done) is None
        assert os.listdir(spec.save_dir) == []

        (spec.save_dir / "latest.pt").write_bytes(b"x")  # the script's next save
        assert session.record(done) is None
        state = json.loads((spec.save_dir / ".pai-launch" / "state.json").read_text())
        assert state["last_exit"] == {"code": 6, "reason": "removed"}
    finally:
        session.close()


def test_the_removal_message_says_what_ran_and_what_to_do(tmp_path):
    folder = tmp_path / "PAI"
    init = removed_message(folder, INIT_RUN, remade=True)
    assert init.startswith(f"the save folder {folder} was removed while the init run was running: the script deletes "
                           "its "
                           "save folder on a fresh start")
    worker = removed_message(folder, "generation 2", remade=True)
    assert "while generation 2 was running (a new folder of that name has taken its place)" in worker
    assert "--perforate_model_parallel" in worker and "--fresh" in worker
    assert removed_message(folder, None, remade=False) == f"the save folder {folder} was removed"
