"""Real perforatedai: a script that loads SAVE/latest.pt resumes a crash in its first generation from latest.pt
(with --resume-from latest pai-launch passes --pai_load_folder once it is there), and trains to completion."""

import os

import pytest

from tests.helpers import REPO, run_pai_launch

pytestmark = pytest.mark.timeout(400)

SCRIPT = REPO / "tests" / "real" / "latest_resume_script.py"


def test_a_crash_before_the_first_switch_resumes_from_latest_pt(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "PAI_TEST_CRASHED_FLAG": str(tmp_path / "crashed")}
    done, _ = run_pai_launch(["--log-format", "json", "--nproc", "2", "--backoff", "0.2", "--resume-from", "latest",
                              str(SCRIPT), "--no-graphs"], cwd=tmp_path, env=env, timeout=380)
    events = done.events()

    assert done.popen.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "crashed").exists(), "rank 1 crashed in generation 1"
    failed = [e for e in events if e["event"] == "generation_failed"]
    assert [(e["generation"], e["rank"]) for e in failed] == [(1, 1)], failed
    starts = [(e["generation"], e["load_folder"]) for e in events if e["event"] == "generation_started"]
    assert starts[:2] == [(1, None), (2, "PAI")], starts  # no switch file yet: latest.pt is what the retry loads
    assert "[rank0]: [latest] rank 0 loaded PAI/latest.pt" in done.stdout
    assert "[rank1]: [latest] rank 1 loaded PAI/latest.pt" in done.stdout
    assert (tmp_path / "PAI" / ".training_complete").is_file()
    added = [name for e in events if e["event"] == "dendrites_added" for name in e["switch_files"]]
    assert added == ["switch_2.pt", "switch_4.pt"], added  # after the restructures, each switch file, once
