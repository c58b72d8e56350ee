"""The dashboard's and the alert rules' queries name only metrics pai-launch exports, so a renamed metric cannot leave
a panel blank or an alert silent."""

from __future__ import annotations

import json

import pytest

from pai_launch.supervise.outputs.metrics import RunMetrics
from tests.alerting import DASHBOARD, dashboard_queries, metric_names, rule_expressions

pytestmark = pytest.mark.timeout(30)


def exported(tmp_path) -> set[str]:
    """Every sample name a run's registry serves (counters' _total, histograms' _bucket/_sum/_count, info's _info)."""
    metrics = RunMetrics(lambda: tmp_path)
    metrics.observe({"event": "generation_started", "generation": 1, "nproc": 1})
    metrics.observe({"event": "generation_failed", "generation": 1, "duration_s": 1.0, "exit_codes": {"0": 1}})
    metrics.observe({"event": "generation_started", "generation": 2, "nproc": 1})
    metrics.observe({"event": "training_reached", "generation": 2})
    return {sample.name for family in metrics.registry.collect() for sample in family.samples}


def test_every_metric_the_dashboard_and_the_rules_query_is_exported(tmp_path):
    names = exported(tmp_path)
    queried = metric_names(dashboard_queries()) | metric_names(rule_expressions())
    assert queried - names == set()
    # the rules watch what the issue of a run needs: health, progress, failures and their budget
    assert {"pai_launch_healthy", "pai_launch_last_progress_timestamp_seconds", "pai_launch_consecutive_failures",
            "pai_launch_max_failures"} <= metric_names(rule_expressions())


def test_every_dashboard_panel_queries_the_chosen_data_source_and_is_placed():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "pai-launch"
    assert [variable["name"] for variable in dashboard["templating"]["list"]] == ["datasource", "job", "instance"]
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"}, panel["title"]
        for target in panel["targets"]:
            assert '$job' in target["expr"] and '$instance' in target["expr"], (panel["title"], target["expr"])
