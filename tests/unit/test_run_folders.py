"""Each supervisor start's own log folder, LOG_ROOT/<run id>/<start>: named after the run, never an earlier start's,
never outside the log root whatever the run id holds."""

from __future__ import annotations

import pytest

from pai_launch.supervise.children.runfolders import make_run_root, start_folder_name
from pai_launch.supervise.job import plan

NOW = 1_767_323_045.0  # 2026-01-02 03:04:05 UTC


@pytest.mark.parametrize("run_id, name", [
    ("20260102-030405-abcd1234", "20260102-030405-abcd1234"),
    ("../up", "_._up"), ("a/b", "a_b"), ("..", "_."), (".", "_"), ("", "_"), ("my run: 1", "my_run__1"),
    (".hidden", "_hidden"), ("v1.2", "v1.2"),
])
def test_a_run_id_becomes_one_folder_name_inside_its_parent(run_id, name):
    assert plan.path_safe(run_id) == name


def test_elastic_run_ids_are_path_safe():
    assert plan.new_elastic_run_id("../x y", 3).startswith("_._x_y-g3-")


def test_the_start_folder_is_named_by_utc_time_and_pid():
    assert start_folder_name(NOW, 4242) == "20260102T030405Z-4242"


def test_each_start_gets_a_new_folder_under_its_run_even_when_the_name_is_taken(tmp_path):
    first = make_run_root(tmp_path, "run-1", NOW, 7)
    (first / "generation-1").mkdir()
    again = make_run_root(tmp_path, "run-1", NOW, 7)  # same second, same pid (a pid reused)
    other = make_run_root(tmp_path, "run-2", NOW, 8)

    assert first == tmp_path / "run-1" / "20260102T030405Z-7"
    assert again == tmp_path / "run-1" / "20260102T030405Z-7-2" and list(again.iterdir()) == []
    assert other == tmp_path / "run-2" / "20260102T030405Z-8"
    assert (first / "generation-1").is_dir(), "an earlier start's files are left alone"


def test_a_run_id_cannot_lead_the_folder_out_of_the_log_root(tmp_path):
    root = make_run_root(tmp_path / "logs", "../../escape", NOW, 1)

    assert root.resolve().is_relative_to((tmp_path / "logs").resolve())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
