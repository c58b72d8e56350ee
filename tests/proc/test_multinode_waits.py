"""Waiting for nodes is bounded by --rdzv-timeout and says what it waits for: node 0 whose peers never come, and a
node whose node 0 never comes, each give up at the timeout with one clear reason and nothing left running."""

from __future__ import annotations

import pytest

from tests.proc.job import free_port, start_node

pytestmark = pytest.mark.timeout(90)


def test_node_0_whose_peer_never_comes_gives_up_at_the_rdzv_timeout_naming_it(scene):
    node0 = start_node(scene, 0, free_port(), "--rdzv-timeout", "4", script_args=["--generations", "2"])
    rc = node0.wait(60)  # torch's own join timeout, which the option did not reach before, was 600 s

    assert rc == 1, node0.log_summary()
    waiting = node0.event("rendezvous_waiting")
    assert (waiting["generation"], waiting["nodes"], waiting["waiting_for"], waiting["timeout_s"]) == (1, "2", "1", 4.0)
    assert len(node0.events("generation_started")) == 1, "the wait is bounded: not retried into a second wait"
    reason = node0.event("run_finished")["reason"]
    assert "not every node joined generation 1 within --rdzv-timeout 4 s" in reason, reason
    assert "node(s) 1 never reached node 0's store" in reason and "raise --rdzv-timeout" in reason
    assert node0.events("retry_scheduled") == []


def test_a_node_whose_node_0_never_comes_gives_up_naming_the_store_and_starts_nothing(scene):
    port = free_port()
    node1 = start_node(scene, 1, port, "--rdzv-timeout", "3", script_args=["--generations", "1"], json_logs=False)
    rc = node1.wait(30)

    assert rc == 2, node1.stderr
    (line,) = [text for text in node1.stderr.strip().splitlines() if text.startswith("pai-launch: error:")]
    assert f"cannot reach the job's store at 127.0.0.1:{port} within 3 s" in line and "start node 0 first" in line
    assert scene.records() == []
