"""state.json is checked field by field before anything is trusted; a bad one is refused in one line and moved aside
(never deleted); its save_name is never taken as a path."""

import json
import os

import pytest

from pai_launch.savefmt.record import RecordStore, RunRecord, StateError, plain_save_name, record_problem

pytestmark = pytest.mark.timeout(30)

GOOD = {"fingerprint": {"script": "/w/train.py"}, "run_id": "R", "save_name": "PAI", "generation": 2, "failures": 1,
        "init_done": True, "last_switch": "switch_4.pt", "last_exit": {"code": None, "reason": "x"},
        "updated": "2026-01-01T00:00:00Z", "format": 1}


def test_a_good_record_has_no_problem_and_loads():
    assert record_problem(GOOD) is None
    assert record_problem({k: GOOD[k] for k in ("fingerprint", "run_id", "save_name")}) is None


@pytest.mark.parametrize("key, value, words", [
    ("generation", "2", "'generation' is \"2\", not a whole number"),
    ("generation", True, "'generation' is true"),
    ("failures", -1, "'failures' is -1"),
    ("init_done", "yes", "'init_done'"),
    ("fingerprint", [], "'fingerprint' is []"),
    ("run_id", 7, "'run_id' is 7"),
    ("last_switch", "../../etc/passwd", "'last_switch'"),
    ("last_exit", {"code": "4"}, "'last_exit'"),
    ("save_name", "../../../../etc", "'save_name' is \"../../../../etc\", not a folder name inside"),
    ("save_name", "/etc", "'save_name'"),
    ("save_name", ["PAI"], "'save_name'"),
])
def test_each_field_of_the_wrong_type_is_named(key, value, words):
    assert words in record_problem({**GOOD, key: value})


def test_missing_keys_and_a_non_object_are_named():
    assert record_problem([1, 2]) == "it holds a JSON list, not an object"
    assert record_problem({"run_id": "R", "save_name": "PAI"}) == "it has no 'fingerprint'"


@pytest.mark.parametrize("name, ok", [("PAI", True), ("runs/PAI", True), ("..", False), ("a/../../b", False),
                                      ("", False), (".", False), ("/abs", False), ("a\0b", False)])
def test_plain_save_names(name, ok):
    assert plain_save_name(name) is ok


def _store(tmp_path, text: str) -> RecordStore:
    store = RecordStore(tmp_path / "PAI")
    store.folder.mkdir(parents=True)
    store.state_path.write_text(text)
    return store


def test_a_wrong_type_record_is_one_line_and_moved_aside_byte_for_byte(tmp_path):
    text = json.dumps({**GOOD, "generation": "two"})
    store = _store(tmp_path, text)
    with pytest.raises(StateError) as caught:
        store.load()
    message = str(caught.value)
    assert "\n" not in message and "'generation'" in message and "moved aside to state.json.bad-" in message
    assert not store.state_path.exists()
    assert [p.read_text() for p in store.folder.glob("state.json.bad-*")] == [text]


def test_without_move_bad_nothing_is_moved(tmp_path):
    store = _store(tmp_path, json.dumps({**GOOD, "save_name": "../../x"}))
    with pytest.raises(StateError, match="move it aside"):
        store.load(move_bad=False)
    assert store.state_path.exists()


def test_a_second_bad_record_does_not_overwrite_the_first_one_moved_aside(tmp_path):
    store = _store(tmp_path, "[1]")
    with pytest.raises(StateError):
        store.load()
    store.state_path.write_text("[2]")
    with pytest.raises(StateError):
        store.load()
    assert sorted(p.read_text() for p in store.folder.glob("state.json.bad-*")) == ["[1]", "[2]"]


def test_a_pipe_as_state_json_is_refused_at_once_and_moved_aside(tmp_path):
    store = RecordStore(tmp_path / "PAI")
    store.folder.mkdir(parents=True)
    os.mkfifo(store.state_path)
    with pytest.raises(StateError, match=r"state.json is a named pipe \(FIFO\), not a regular file: moved aside"):
        store.load()
    assert not os.path.lexists(store.state_path)


def test_a_huge_sparse_state_json_is_refused_before_it_is_read(tmp_path):
    store = RecordStore(tmp_path / "PAI")
    store.folder.mkdir(parents=True)
    with open(store.state_path, "wb") as handle:
        handle.truncate(1536 * 1024 * 1024)
    with pytest.raises(StateError, match="is 1610612736 bytes, more than the 16777216 bytes it can be: moved aside"):
        store.load()


def test_a_record_written_through_a_link_in_place_of_its_folder_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "PAI").mkdir()
    (tmp_path / "PAI" / ".pai-launch").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="is a symbolic link, not a directory"):
        RecordStore(tmp_path / "PAI").save(RunRecord(fingerprint={}, run_id="R", save_name="PAI"))
    assert os.listdir(tmp_path / "elsewhere") == []
