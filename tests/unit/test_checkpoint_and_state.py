"""Checkpoint integrity (safetensors without torch), quarantine, and pai-launch's state files."""

import json
import os
import struct
import subprocess
import sys
import threading

import pytest

from pai_launch.savefmt import checkpoint
from pai_launch.savefmt.locks import SaveFolderLock
from pai_launch.savefmt.record import RecordStore, RunRecord, StateError, fingerprint, fingerprint_differences
from tests.helpers import safetensors_bytes


def safetensors(payload: bytes = b"\x01\x02\x03\x04", extra_header: dict | None = None) -> bytes:
    return safetensors_bytes(payload, extra_header)


def test_a_whole_file_passes(tmp_path):
    path = tmp_path / "switch_2.pt"
    path.write_bytes(safetensors(extra_header={"__metadata__": {"format": "pt"}}))
    assert checkpoint.problem(path) is None


@pytest.mark.parametrize("cut", [0, 4, 8, 20, -1])
def test_every_truncation_is_caught(tmp_path, cut):
    data = safetensors(b"x" * 100)
    path = tmp_path / "switch_2.pt"
    path.write_bytes(data[:cut] if cut >= 0 else data[:-1])
    assert checkpoint.problem(path) is not None


@pytest.mark.parametrize(
    "content, message",
    [
        (struct.pack("<Q", 5) + b"{nope", "not valid JSON"),
        (struct.pack("<Q", 2**62) + b"{}", "does not fit"),
        (safetensors(b"abcd") + b"extra", "tensors cover"),
    ],
)
def test_malformed_headers_are_named(tmp_path, content, message):
    path = tmp_path / "switch_2.pt"
    path.write_bytes(content)
    assert message in checkpoint.problem(path)


def test_torch_save_zip_archives_are_checked_by_their_central_directory(tmp_path):
    import zipfile

    path = tmp_path / "switch_2.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"x" * 1000)
    assert checkpoint.problem(path) is None
    path.write_bytes(path.read_bytes()[:-30])
    assert "incomplete" in checkpoint.problem(path)


@pytest.mark.parametrize("content", [b"just some text, long enough\n", b"\0" * 4096, b"\xff" * 64])
def test_a_file_that_is_neither_safetensors_nor_torch_save_is_not_a_checkpoint(tmp_path, content):
    path = tmp_path / "switch_2.pt"
    path.write_bytes(content)
    assert "not a checkpoint" in checkpoint.problem(path)


def test_a_pipe_in_place_of_a_switch_file_is_refused_without_blocking(tmp_path):
    path = tmp_path / "switch_2.pt"
    os.mkfifo(path)
    assert checkpoint.problem(path) == "a named pipe (FIFO), not a checkpoint file"


def test_formats_that_cannot_be_checked_are_taken_as_they_are(tmp_path):
    path = tmp_path / "switch_2.pt"
    path.write_bytes(b"\x80\x02legacy pickle bytes")
    assert checkpoint.problem(path) is None


def test_torn_newest_is_quarantined_and_the_previous_becomes_newest(tmp_path):
    (tmp_path / "switch_2.pt").write_bytes(safetensors())
    torn = safetensors(b"y" * 50)[:30]
    (tmp_path / "switch_4.pt").write_bytes(torn)
    (tmp_path / "switch_6.pt").write_bytes(b"")
    seen = []
    newest = checkpoint.newest_valid_switch(tmp_path, lambda name, why, moved: seen.append((name, moved)))
    assert newest == "switch_2.pt"
    assert [name for name, _ in seen] == ["switch_6.pt", "switch_4.pt"]
    moved = dict(seen)["switch_4.pt"]
    assert moved.parent == tmp_path / ".pai-launch" / "quarantine" and moved.read_bytes() == torn


def test_quarantine_never_overwrites_an_earlier_copy(tmp_path):
    for content in (b"first", b"second"):
        (tmp_path / "switch_2.pt").write_bytes(content)
        checkpoint.quarantine(tmp_path, "switch_2.pt", now=0.0)
    kept = sorted(p.read_bytes() for p in (tmp_path / ".pai-launch" / "quarantine").iterdir())
    assert kept == [b"first", b"second"]


def test_no_valid_switch_left_returns_none(tmp_path):
    (tmp_path / "switch_2.pt").write_bytes(b"\x00")
    assert checkpoint.newest_valid_switch(tmp_path, lambda *a: None) is None
    assert not (tmp_path / "switch_2.pt").exists()


def test_state_round_trip_and_atomic_replace(tmp_path):
    store = RecordStore(tmp_path)
    assert store.load() is None
    state = RunRecord(fingerprint={"nproc": 2}, run_id="RID", save_name="PAI", generation=3, failures=1, init_done=True)
    store.save(state)
    loaded = store.load()
    assert (loaded.run_id, loaded.generation, loaded.failures, loaded.init_done) == ("RID", 3, 1, True)
    assert [p.name for p in store.folder.iterdir()] == ["state.json"]  # no temp file left behind


def test_state_is_always_whole_while_rewritten(tmp_path):
    store = RecordStore(tmp_path)
    store.save(RunRecord(fingerprint={}, run_id="R", save_name="PAI"))
    stop = threading.Event()
    bad = []

    def reader():
        while not stop.is_set():
            try:
                json.loads(store.state_path.read_text())
            except ValueError as exc:
                bad.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    for generation in range(200):
        store.save(RunRecord(fingerprint={"x": "y" * generation}, run_id="R", save_name="PAI", generation=generation))
    stop.set()
    thread.join()
    assert bad == []


def test_unreadable_state_is_an_error_naming_the_file_and_is_moved_aside(tmp_path):
    store = RecordStore(tmp_path)
    store.folder.mkdir()
    store.state_path.write_text("{torn")
    with pytest.raises(StateError, match="state.json is not valid JSON: moved aside to state.json.bad-"):
        store.load()
    assert not store.state_path.exists()
    assert [p.read_text() for p in store.folder.glob("state.json.bad-*")] == ["{torn"]


def test_fingerprint_differences_name_what_changed(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    old = fingerprint(script, ("--lr", "1"), 2)
    new = fingerprint(script, ("--lr", "2"), 4)
    assert fingerprint_differences(old, new) == ["nproc 2 -> 4", "script_args ['--lr', '1'] -> ['--lr', '2']"]
    assert fingerprint_differences(old, old) == []


@pytest.mark.proc  # starts processes
def test_lock_excludes_a_second_holder_and_names_the_first(tmp_path):
    first = SaveFolderLock(tmp_path)
    first.acquire()
    holder = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; from pai_launch.savefmt.locks import "
         "SaveFolderLock\n"
         "try:\n    SaveFolderLock(Path(sys.argv[1])).acquire()\nexcept Exception as e:\n    print(e)", str(tmp_path)],
        capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))), timeout=30,
    )
    assert f"PID {os.getpid()}" in holder.stdout
    first.release()
    again = SaveFolderLock(tmp_path)
    again.acquire()  # released: free to take
    again.release()


@pytest.mark.proc  # starts processes
def test_lock_of_a_dead_process_is_taken_over(tmp_path):
    script = "import sys, os; from pathlib import Path; from pai_launch.savefmt.locks import SaveFolderLock; " \
        "SaveFolderLock(Path(sys.argv[1])).acquire(); os._exit(0)"
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, timeout=30,
                   cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    lock = SaveFolderLock(tmp_path)
    lock.acquire()
    assert lock.path.read_text().strip() == str(os.getpid())
    lock.release()


def test_a_removed_and_recreated_folder_stays_locked_by_its_first_holder(tmp_path):
    save = tmp_path / "PAI"
    first = SaveFolderLock(save)
    first.acquire()
    (save / ".pai-launch" / "lock.node0").unlink()
    (save / ".pai-launch").rmdir()
    save.rmdir()
    save.mkdir()  # the lock file went with the old folder; the path lock did not
    with pytest.raises(StateError, match=f"PID {os.getpid()}"):
        SaveFolderLock(save).acquire()
    assert not (save / ".pai-launch").exists()  # a refused lock writes nothing
    first.release()
    again = SaveFolderLock(save)
    again.acquire()
    again.release()


def test_checking_without_writing_creates_nothing_and_still_excludes(tmp_path):
    save = tmp_path / "PAI"
    save.mkdir()
    guard = SaveFolderLock(save)
    guard.acquire(write=False)
    assert list(save.iterdir()) == []
    with pytest.raises(StateError, match="another pai-launch"):
        SaveFolderLock(save).acquire()
    guard.release()
