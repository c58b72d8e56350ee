"""scripts/bench_scale.py at N = 4: a job of four nodes on this machine, each a real pai-launch and agent, through
three generations, a SIGTERM on one node and a kill -9 of another. Every node logs the same decisions, and nothing
any of them started is left. The figures it prints (times, rates, memory) are for people; tests assert none."""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from tests.helpers import PYTHON, REPO

pytestmark = pytest.mark.timeout(600)


def _harness(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    rows = tmp_path / "rows.json"
    harness = subprocess.Popen([PYTHON, "-m", "scripts.bench_scale", "--nodes", "4", "--generations", "3",
                                "--train-seconds", "1", "--json", str(rows), *args],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = harness.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        harness.terminate()  # SIGTERM: the harness sweeps what its jobs started before it exits
        out, err = harness.communicate(timeout=60)
        pytest.fail(f"the harness did not finish in 540 s:\n{out}\n{err}")
    proc = subprocess.CompletedProcess(harness.args, harness.returncode, out, err)
    assert rows.exists(), out + err
    [row] = json.loads(rows.read_text())
    return proc, row


def test_four_nodes_decide_alike_stop_together_and_leave_nothing(tmp_path):
    proc, row = _harness(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row["exit_codes"] == [0, 0, 0, 0]
    assert row["same_decisions"], "every node logs the same generation ends"
    assert row["left"] == 0, "no process of the three jobs outlives them"
    assert row["sigterm_exit_codes"] == [143, 143, 143, 143], "a SIGTERM on one node stops the whole job as stopped"
    assert math.isfinite(row["kill9_workers_gone_s"]), "a node's kill -9 stops the other nodes' workers"
    assert row["store_backend"] in ("libuv", "legacy")
    assert row["store_requests_training_per_s"] > 0, "the store's traffic is read from its sockets"


def test_four_nodes_on_one_address_share_it_without_a_collision(tmp_path):
    """Several nodes of a job on one host (as Slurm may place them): one address, nothing bound twice."""
    proc, row = _harness(tmp_path, "--packed", "--no-stops")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row["exit_codes"] == [0, 0, 0, 0]
    assert row["same_decisions"]
    assert row["left"] == 0
