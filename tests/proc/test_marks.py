"""The suite's own rule: a test that starts a process carries the `proc` mark (tests/conftest.py), so
`-m "not proc"` runs only pure tests. Checked on a scratch test run with the suite's conftest as a plugin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_an_unmarked_test_that_starts_a_process_fails_and_a_marked_one_passes(tmp_path):
    (tmp_path / "test_scratch.py").write_text(
        "import subprocess\nimport pytest\n\n"
        "def test_unmarked():\n    subprocess.run(['true'], check=True)\n\n"
        "@pytest.mark.proc\ndef test_marked():\n    subprocess.run(['true'], check=True)\n\n"
        "def test_pure():\n    assert 1 + 1 == 2\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_scratch.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert "3 passed" in done.stdout and "1 error" in done.stdout, done.stdout + done.stderr  # the error: teardown
    # The summary line may carry the reason after " - " (how much depends on the terminal's width).
    errored = [line.split(" - ")[0] for line in done.stdout.splitlines() if line.startswith("ERROR ")]
    assert len(errored) == 1 and errored[0].endswith("::test_unmarked") and "without the proc mark" in done.stdout
