"""scripts/soak.py's runs, each a real pytest process: a failed run's test folders stay for reading, a passed run's
go."""

from __future__ import annotations

import pytest

from tests.helpers import REPO, load_script

pytestmark = pytest.mark.timeout(120)

CASE = "def test_writes(tmp_path):\n    (tmp_path / 'node0.log').write_text('seen')\n    assert {verdict}\n"


def test_a_failed_runs_test_folders_are_kept_beside_its_log_and_a_passed_runs_are_removed(tmp_path):
    soak = load_script("soak")
    logs = tmp_path / "logs"
    logs.mkdir()
    python = str(REPO / ".venv" / "bin" / "python")
    exits = {}
    for n, verdict in ((1, False), (2, True)):
        case = tmp_path / f"case{n}" / "test_case.py"
        case.parent.mkdir()
        case.write_text(CASE.format(verdict=verdict))
        exits[n] = soak.run_once([str(case)], python, logs / f"run-{n}.log")[0]
    assert exits == {1: 1, 2: 0}, (logs / "run-1.log").read_text()
    assert [path.read_text() for path in (logs / "run-1").rglob("node0.log")] == ["seen"]
    assert not (logs / "run-2").exists() and "1 passed" in (logs / "run-2.log").read_text()
