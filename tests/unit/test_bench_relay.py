"""scripts/bench_relay.py in a tiny size, so it keeps working: real writer processes, every relaying process, both
modes, every byte written accounted for (relayed or skipped). No times are asserted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.timeout(120)


@pytest.mark.proc  # starts processes
def test_the_relay_benchmark_runs_and_accounts_for_every_byte(tmp_path):
    rows_file = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, "-m", "scripts.bench_relay", "--ranks", "2", "--mb", "0.5", "--rate", "5",
                           "--json", str(rows_file)], cwd=REPO, capture_output=True, text=True, timeout=100)

    assert done.returncode == 0, done.stderr
    assert "MB/s" in done.stdout and "peak RSS MB" in done.stdout and "goals: relay" in done.stdout, done.stdout
    rows = json.loads(rows_file.read_text())
    assert [(row["kind"], row["mode"]) for row in rows] == [
        (kind, mode) for mode in ("backlog", "live") for kind in ("relay", "per-line", "copy")]
    for row in rows:
        assert row["written_mb"] > 1.0, row
        assert abs(row["relayed_mb"] + row["skipped_mb"] - row["written_mb"]) < 1e-6, row
        assert row["peak_rss_mb"] > 0, row
