"""Tests sharing one thing on the machine run in one pytest-xdist worker: each group names a folder or file that
exists, and a file falls in its own group before its folder's."""

from __future__ import annotations

import pytest

from tests.conftest import SHARED_GROUPS, TESTS, shared_group

pytestmark = pytest.mark.timeout(30)


def test_every_group_names_a_folder_or_file_of_the_suite():
    assert [name for name in SHARED_GROUPS if not (TESTS / name).exists()] == []


def test_a_file_takes_its_own_group_then_its_folders_and_others_none():
    assert shared_group(("slurm", "test_slurm_jobs.py")) == "slurm-cluster"
    assert shared_group(("real", "test_multinode_real.py")) == "two-host-namespaces"
    assert shared_group(("real", "test_example.py")) is None
    assert shared_group(("unit", "test_machine.py")) is None


def test_the_suite_runs_in_workers_with_the_groups_kept_together():
    script = (TESTS.parent / "scripts" / "test.sh").read_text()
    assert "--dist loadgroup" in script and "PAI_LAUNCH_TEST_WORKERS" in script
