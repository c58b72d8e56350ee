"""scripts/bench_multinode.py's gap: from the failing rank's exit to the last start of the retry, read from the
workers' time lines; no gap when the retry did not start everywhere."""

from __future__ import annotations

import pytest

from tests.helpers import load_script

pytestmark = pytest.mark.timeout(30)


def test_the_gap_runs_from_the_failure_to_the_last_start_of_the_retry(tmp_path):
    bench = load_script("bench_multinode")
    times = tmp_path / "times.txt"
    times.write_text("start 2 0 100.0\nstart 2 1 100.1\nfail 2 1 101.0\nstart 3 1 102.0\nstart 3 0 102.5\n")
    assert bench.gap(times, 2) == pytest.approx(1.5)
    times.write_text("start 2 0 100.0\nfail 2 1 101.0\nstart 3 1 102.0\n")
    assert bench.gap(times, 2) is None  # one node's retry never started
    assert bench.gap(tmp_path / "absent.txt", 2) is None
