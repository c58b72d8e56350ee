"""Reading the save folder: switch files by (mtime, size), the marker, init outputs elsewhere."""

import os
import time

from pai_launch.savefmt import savedir


def test_switch_numbers():
    assert savedir.switch_number("switch_4.pt") == 4
    assert savedir.switch_number("switch_x.pt") is None
    assert savedir.switch_number("beforeSwitch_2.pt") is None
    assert savedir.switch_number("switch_4.pt.tmp") is None


def test_rewriting_the_same_switch_file_counts_as_progress(tmp_path):
    path = tmp_path / "switch_2.pt"
    path.write_bytes(b"a" * 10)
    before = savedir.snapshot_switches(tmp_path)
    assert savedir.changed_switches(before, savedir.snapshot_switches(tmp_path)) == []
    path.write_bytes(b"b" * 12)
    assert savedir.changed_switches(before, savedir.snapshot_switches(tmp_path)) == ["switch_2.pt"]


def test_same_size_rewrite_is_seen_through_mtime(tmp_path):
    path = tmp_path / "switch_2.pt"
    path.write_bytes(b"a" * 10)
    before = savedir.snapshot_switches(tmp_path)
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert savedir.changed_switches(before, savedir.snapshot_switches(tmp_path)) == ["switch_2.pt"]


def test_new_switch_files_are_listed_lowest_first(tmp_path):
    for n in (10, 4):
        (tmp_path / f"switch_{n}.pt").write_bytes(b"x")
    assert savedir.changed_switches({}, savedir.snapshot_switches(tmp_path)) == ["switch_4.pt", "switch_10.pt"]
    assert savedir.newest_switch(tmp_path) == "switch_10.pt"


def test_missing_folder_reads_as_empty(tmp_path):
    assert savedir.snapshot_switches(tmp_path / "nope") == {}
    assert savedir.marker_mtime(tmp_path / "nope") is None


def test_find_init_outputs_sees_fresh_files_only_and_skips_hidden_and_venvs(tmp_path):
    for folder in ("OTHER", ".hidden", "venv/lib", "old"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "array_dims.csv").write_text("x")
    past = time.time() - 3600
    os.utime(tmp_path / "old" / "array_dims.csv", (past, past))
    assert savedir.find_init_outputs(tmp_path, since=time.time() - 60) == [tmp_path / "OTHER"]


def test_last_write_is_the_newest_file_directly_in_the_folder_as_the_watcher_sees_it(tmp_path):
    assert savedir.last_write(tmp_path / "missing") is None
    assert savedir.last_write(tmp_path) is None
    (tmp_path / "latest.pt").write_bytes(b"x")
    (tmp_path / "scores.csv").write_text("1\n")
    os.utime(tmp_path / "latest.pt", (1_000_000.0, 1_000_000.0))
    os.utime(tmp_path / "scores.csv", (2_000_000.0, 2_000_000.0))
    own = tmp_path / ".pai-launch"
    own.mkdir()
    (own / "events.jsonl").write_text("{}\n")  # pai-launch's own writes, one folder down: not the workers'
    os.utime(own, (3_000_000.0, 3_000_000.0))
    assert savedir.last_write(tmp_path) == 2_000_000.0
