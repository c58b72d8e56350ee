"""The run's Prometheus metrics follow its events: a scripted history of log events in, metric values out."""

from __future__ import annotations

import json
import math

import pytest

from pai_launch.supervise.outputs.metrics import RunMetrics

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def metrics(tmp_path):
    clock = Clock()
    save = tmp_path / "PAI"
    save.mkdir()
    found = RunMetrics(lambda: save, clock=clock)
    found.clock, found.save = clock, save
    return found


def value(metrics, name: str, **labels) -> float | None:
    return metrics.registry.get_sample_value(name, labels or None)


def test_a_failed_generation_a_retry_and_a_switch_show_in_the_metrics(metrics):
    metrics.observe({"event": "run_started", "run_id": "r1", "script": "train.py", "save_folder": "PAI",
                     "generation": 0,
                     "failures": 0})
    metrics.observe({"event": "init_started"})
    metrics.observe({"event": "generation_started", "generation": 1, "nproc": 2})
    assert value(metrics, "pai_launch_generation") == 1 and value(metrics, "pai_launch_generation_running") == 1
    metrics.clock.now += 7
    metrics.observe({"event": "generation_failed", "generation": 1, "duration_s": 7.0, "rank": 1,
                     "exit_codes": {"1": -9, "0": 1}, "switch_files": []})
    metrics.observe({"event": "retry_scheduled", "failures": 1})
    assert value(metrics, "pai_launch_last_worker_exit_code", rank="1") == -9
    assert value(metrics, "pai_launch_last_worker_exit_code", rank="0") == 1
    assert value(metrics, "pai_launch_consecutive_failures") == 1
    metrics.clock.now += 0.5
    metrics.observe({"event": "generation_started", "generation": 2, "nproc": 2})
    metrics.clock.now += 1.0
    metrics.observe({"event": "training_reached", "generation": 2, "after_s": 1.0})  # the restart's cost ends here
    metrics.observe({"event": "training_reached", "generation": 2, "after_s": 1.2})  # counted once
    (metrics.save / "switch_2.pt").write_bytes(b"x")
    metrics.clock.now += 18.5
    metrics.observe({"event": "generation_ended", "generation": 2, "duration_s": 20.0, "switch_files": ["switch_2.pt"],
                     "complete": False})

    assert value(metrics, "pai_launch_generation_failures_total") == 1
    assert value(metrics, "pai_launch_restarts_total") == 1
    assert value(metrics, "pai_launch_restart_gap_seconds_count") == 1
    assert value(metrics, "pai_launch_restart_gap_seconds_sum") == pytest.approx(1.5)
    assert value(metrics, "pai_launch_generation_duration_seconds_count") == 2
    assert value(metrics, "pai_launch_generation_duration_seconds_sum") == pytest.approx(27.0)
    assert value(metrics, "pai_launch_dendrites") == 1
    assert value(metrics, "pai_launch_consecutive_failures") == 0
    assert value(metrics, "pai_launch_last_worker_exit_code", rank="1") == 0, "every rank exited 0 in generation 2"
    assert value(metrics, "pai_launch_generation_running") == 0
    assert value(metrics, "pai_launch_run_info", run_id="r1", script="train.py", save_folder="PAI") == 1


def test_training_complete_follows_the_marker(metrics):
    metrics.observe({"event": "run_started", "generation": 0})
    assert value(metrics, "pai_launch_training_complete") == 0
    (metrics.save / ".training_complete").write_text("complete")
    metrics.observe({"event": "completion_marker_seen", "generation": 3})
    assert value(metrics, "pai_launch_training_complete") == 1


def test_a_broken_event_never_breaks_logging(metrics):
    event = {"event": "generation_started"}  # no generation: observe raises inside
    assert metrics(None, "info", event) is event


def test_dendrites_and_the_best_score_come_from_perforatedais_files_as_status_reads_them(metrics):
    metrics.observe({"event": "run_started", "generation": 0})
    assert math.isnan(value(metrics, "pai_launch_best_score")), "no score yet"
    (metrics.save / "PAI_config.json").write_text(json.dumps({"maximizing_score": False}))
    (metrics.save / "PAIScores.csv").write_text("Epochs,Validation Scores\n0,1.25\n1,0.79\n2,0.91\n")
    (metrics.save / "PAIparam_counts.csv").write_text("Switch Number,Param Count\n0,612\n1,1260\n2,2016\n")
    metrics.observe({"event": "generation_ended", "generation": 1, "duration_s": 3.0, "switch_files": [],
                     "complete": False})

    assert value(metrics, "pai_launch_best_score") == 0.79
    assert value(metrics, "pai_launch_dendrites") == 2


def test_in_process_restructures_count_and_reset_the_failures_in_a_row(metrics):
    metrics.observe({"event": "run_started", "generation": 0})
    metrics.observe({"event": "retry_scheduled", "failures": 2})
    (metrics.save / "switch_2.pt").write_bytes(b"x")
    for switch, resumed in ((2, 0.12), (4, 0.3)):
        metrics.observe({"event": "restructured_in_process", "generation": 1, "switch": switch,
                         "file": f"switch_{switch}.pt", "resumed_s": resumed, "dendrites": 1})
    assert value(metrics, "pai_launch_restructures_in_process_total") == 2
    assert value(metrics, "pai_launch_in_process_resume_seconds_count") == 2
    assert value(metrics, "pai_launch_in_process_resume_seconds_sum") == pytest.approx(0.42)
    assert value(metrics, "pai_launch_consecutive_failures") == 0 and value(metrics, "pai_launch_dendrites") == 1
