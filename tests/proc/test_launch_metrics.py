"""--metrics-port: a live run serves Prometheus metrics over HTTP, scraped while its third generation runs after a
failure, a retry and a switch file (each restart's gap ends when its workers train), and answers /healthz and /livez
beside them (503 while it is failing); a taken port is refused before anything starts."""

from __future__ import annotations

import json
import signal
import socket
import urllib.error
import urllib.request
from importlib import metadata

import pytest
from prometheus_client.parser import text_string_to_metric_families

import pai_launch
from tests.proc.launch_files import wait_event

pytestmark = pytest.mark.timeout(90)


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def probe(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_live_run_serves_its_metrics_on_localhost(scene):
    script = ["--fail-rank", "0", "--fail-generation", "1", "--generations", "4", "--hang-generation", "3",
              "--heartbeat", "0.1"]  # rank 0 writes latest.pt as it trains: each generation reaches training
    launch = scene.start("--nproc", "2", "--backoff", "0.1", "--metrics-port", "0", script_args=script)
    url = wait_event(launch, "metrics_serving", 30)["url"]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    scene.wait_ready(3, 2)
    wait_event(launch, "training_reached", 30, where=lambda e: e["generation"] == 3)

    samples = scrape(url)
    assert samples[("pai_launch_generation", ())] == 3
    assert samples[("pai_launch_generation_running", ())] == 1
    assert samples[("pai_launch_generation_failures_total", ())] == 1
    assert samples[("pai_launch_restarts_total", ())] == 2
    assert samples[("pai_launch_restart_gap_seconds_count", ())] == 2
    assert samples[("pai_launch_generation_duration_seconds_count", ())] == 2
    assert samples[("pai_launch_dendrites", ())] == 2  # generation 2 wrote switch_4.pt: N/2, as status counts
    assert samples[("pai_launch_training_complete", ())] == 0
    assert samples[("pai_launch_last_worker_exit_code", (("rank", "0"),))] == 0
    assert samples[("pai_launch_last_worker_exit_code", (("rank", "1"),))] == 0
    assert samples[("pai_launch_healthy", ())] == 1 and samples[("pai_launch_max_failures", ())] == 3
    started = samples[("pai_launch_start_time_seconds", ())]
    assert started <= samples[("pai_launch_last_progress_timestamp_seconds", ())]  # the workers wrote since
    [build] = [dict(labels) for (name, labels) in samples if name == "pai_launch_build_info"]
    assert build["torch"] == metadata.version("torch") and build["version"] == pai_launch.__version__
    health = wait_event(launch, "metrics_serving", 1)["health"]
    assert probe(health) == (200, {"healthy": True, "reason": "running", "consecutive_failures": 0, "exit_code": None})
    assert probe(health.replace("/healthz", "/livez"))[0] == 200

    launch.send(signal.SIGTERM)
    assert launch.wait(60) == 143


def test_metrics_on_every_interface_are_served_with_a_warning_and_on_localhost_without(scene):
    launch, rc = scene.run("--nproc", "1", "--metrics-port", "0", "--metrics-host", "0.0.0.0",
                           script_args=["--generations", "1"])
    assert rc == 0, launch.log_summary()
    exposed = launch.event("metrics_exposed")
    assert exposed["host"] == "0.0.0.0" and "without authentication" in exposed["hint"] \
        and "127.0.0.1" in exposed["hint"]
    launch, rc = scene.run("--nproc", "1", "--metrics-port", "0", "--save-name", "PAI2",
                           script_args=["--generations", "1", "--save", "PAI2"])
    assert rc == 0 and "metrics_exposed" not in launch.event_names() and "metrics_serving" in launch.event_names()


def test_a_metrics_port_in_use_is_refused_before_anything_starts(scene):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        launch, rc = scene.run("--metrics-port", str(port))

    assert rc == 2
    assert f"--metrics-port {port} on 127.0.0.1" in launch.stderr and "choose another port" in launch.stderr
    assert scene.records() == [] and not (scene.work / "PAI").exists()


def test_a_failing_run_answers_503_on_healthz_but_stays_alive_on_livez(scene):
    """Between a failed generation and its retry (a long backoff here) the run is failing, not dead: a readiness
    probe or an alert reads 503, a liveness probe 200, and the metrics say the same."""
    script = ["--fail-rank", "1", "--fail-generation", "1", "--generations", "2"]
    launch = scene.start("--nproc", "2", "--backoff", "60", "--metrics-port", "0", script_args=script)
    health = wait_event(launch, "metrics_serving", 30)["health"]
    wait_event(launch, "retry_scheduled", 60)

    status, body = probe(health)
    assert status == 503 and body["consecutive_failures"] == 1 and "in a row without progress" in body["reason"]
    assert probe(health.replace("/healthz", "/livez"))[0] == 200
    assert scrape(health.replace("/healthz", "/metrics"))[("pai_launch_healthy", ())] == 0

    launch.send(signal.SIGTERM)
    assert launch.wait(60) == 143
