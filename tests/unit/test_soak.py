"""scripts/soak.py's closing line: passes out of runs, and which runs failed with pytest's last line."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, load_script

pytestmark = pytest.mark.timeout(30)


def test_the_closing_line_counts_passes_and_names_each_failing_run():
    soak = load_script("soak")
    results = [(0, 60.0, "40 passed"), (1, 70.0, "1 failed, 39 passed"), (0, 61.0, "40 passed")]
    assert soak.summary(results) == "2 of 3 runs passed (run 2: 1 failed, 39 passed)"
    assert soak.summary(results[:1]) == "1 of 1 runs passed"


def test_the_default_files_exist():
    assert [name for name in load_script("soak").DEFAULT_FILES if not (REPO / name).exists()] == []


def test_each_run_turns_a_skipped_test_into_a_failure_so_a_run_without_its_slurm_cluster_is_no_pass():
    environment = load_script("soak").run_environment({"PATH": "/usr/bin", "PAI_LAUNCH_ALL_TIERS": "0"})
    assert environment == {"PATH": "/usr/bin", "PAI_LAUNCH_ALL_TIERS": "1"}

