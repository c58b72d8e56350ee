"""Tests sharing one thing on the machine run in one pytest-xdist worker: each group names a folder or file that
exists, and a file falls in its own group before its folder's."""

from __future__ import annotations

import pytest

from tests.conftest import SHARED_GROUPS, TESTS, scope_of, shared_group

pytestmark = pytest.mark.timeout(30)


def test_every_group_names_a_folder_or_file_of_the_suite():
    assert [name for name in SHARED_GROUPS if not (TESTS / name).exists()] == []


def test_a_file_takes_its_own_group_then_its_folders_and_others_none():
    assert shared_group(("slurm", "test_slurm_jobs.py")) == "slurm-cluster"
    assert shared_group(("real", "test_multinode_real.py")) == "two-host-namespaces"
    assert shared_group(("real", "test_example.py")) is None
    assert shared_group(("unit", "test_machine.py")) is None


def test_a_groups_tests_are_one_unit_of_work_and_every_other_test_its_own():
    assert scope_of("tests/slurm/test_slurm_jobs.py::test_one") == scope_of("tests/slurm/test_slurm_env.py::test_two")
    assert scope_of("tests/real/test_multinode_real.py::test_x[a]") == "group:two-host-namespaces"
    assert scope_of("tests/real/test_example.py::test_y") == "tests/real/test_example.py::test_y"
    assert scope_of("tests/proc/test_launch_cycle.py::test_z") != scope_of("tests/proc/test_launch_cycle.py::test_w")


def test_the_suite_runs_in_workers():
    assert "PAI_LAUNCH_TEST_WORKERS" in (TESTS.parent / "scripts" / "test.sh").read_text()
