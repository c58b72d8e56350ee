"""/healthz and /livez: the pure judgement over scripted histories, and the metrics port answering both."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from pai_launch.core.health import LOOP_SILENT_AFTER, RunHealth, liveness, readiness
from pai_launch.supervise.outputs.metrics import RunMetrics

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("health, now, live, ready, reason", [
    (RunHealth(), 5.0, False, False, "has not started"),
    (RunHealth(loop_turned_at=10.0), 10.2, True, True, "running"),
    (RunHealth(loop_turned_at=10.0), 10.0 + LOOP_SILENT_AFTER + 1, False, False, "has not turned for 11 s"),
    (RunHealth(loop_turned_at=10.0, consecutive_failures=2), 10.1, True, False, "2 failed generation(s) in a row"),
    (RunHealth(loop_turned_at=10.0, exit_code=4), 10.1, True, False, "ended with exit code 4"),
    (RunHealth(loop_turned_at=10.0, exit_code=0), 10.1, True, True, "ended with exit code 0"),
])
def test_alive_while_the_loop_turns_and_healthy_while_not_failing(health, now, live, ready, reason):
    assert liveness(health, now).healthy is live
    verdict = readiness(health, now)
    assert verdict.healthy is ready and verdict.status == (200 if ready else 503)
    assert reason in verdict.reason


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def served(tmp_path):
    clock = Clock()
    metrics = RunMetrics(lambda: tmp_path, clock=clock, max_failures=3, wall=lambda: 1_700_000_000.0)
    url = metrics.serve("127.0.0.1", 0)
    yield metrics, clock, url.removesuffix("/metrics")
    metrics.close()


def test_the_metrics_port_answers_health_from_the_run_s_events_and_the_loop_s_turns(served):
    metrics, clock, base = served
    assert get(base + "/livez")[0] == 503  # no turn of the loop yet
    metrics.loop_turned(clock.now)
    assert get(base + "/healthz") == (200, {"healthy": True, "reason": "running", "consecutive_failures": 0,
                                            "exit_code": None})
    metrics.observe({"event": "generation_failed", "generation": 1, "duration_s": 1.0, "exit_codes": {"0": 1}})
    metrics.observe({"event": "retry_scheduled", "failures": 1})
    status, body = get(base + "/healthz")
    assert status == 503 and "1 failed generation(s) in a row" in body["reason"]
    assert get(base + "/livez")[0] == 200  # failing, but alive: a liveness probe must not restart it
    assert metrics.registry.get_sample_value("pai_launch_healthy") == 0
    metrics.observe({"event": "generation_ended", "generation": 2, "duration_s": 2.0, "switch_files": ["switch_2.pt"]})
    assert get(base + "/healthz")[0] == 200
    clock.now += LOOP_SILENT_AFTER + 5  # the loop stopped turning
    status, body = get(base + "/livez")
    assert status == 503 and "has not turned" in body["reason"]
    with urllib.request.urlopen(base + "/metrics", timeout=10) as response:
        assert b"pai_launch_generation " in response.read()


def test_build_start_progress_and_budget_are_exported(tmp_path):
    metrics = RunMetrics(lambda: tmp_path, max_failures=5, wall=lambda: 1_700_000_000.0)
    value = metrics.registry.get_sample_value
    assert value("pai_launch_start_time_seconds") == 1_700_000_000.0
    assert value("pai_launch_last_progress_timestamp_seconds") == 1_700_000_000.0  # nothing written yet: the start
    (tmp_path / "latest.pt").write_bytes(b"x")
    written = (tmp_path / "latest.pt").stat().st_mtime
    assert value("pai_launch_last_progress_timestamp_seconds") == written
    assert value("pai_launch_max_failures") == 5
    build = [s for s in metrics.registry.collect() if s.name == "pai_launch_build"][0].samples[0]
    assert build.name == "pai_launch_build_info" and build.labels["version"] and build.labels["python"].count(".") == 2


def test_a_multi_node_job_labels_every_metric_with_its_node(tmp_path):
    metrics = RunMetrics(lambda: tmp_path, node=1)
    metrics.observe({"event": "generation_started", "generation": 2, "nproc": 2})
    metrics.observe({"event": "generation_failed", "generation": 2, "duration_s": 1.0, "exit_codes": {"0": -9}})
    value = metrics.registry.get_sample_value
    assert value("pai_launch_generation", {"node": "1"}) == 2
    assert value("pai_launch_last_worker_exit_code", {"node": "1", "rank": "0"}) == -9
    unlabelled = [sample.name for family in metrics.registry.collect() for sample in family.samples
                  if "node" not in sample.labels]
    assert unlabelled == []
