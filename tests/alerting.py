"""The shipped dashboard and alert rules, read as data: their PromQL expressions and the metric names those use."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers import REPO

RULES = REPO / "scripts" / "prometheus" / "pai-launch-rules.yaml"
RULE_TESTS = REPO / "scripts" / "prometheus" / "pai-launch-rules.test.yaml"
DASHBOARD = REPO / "scripts" / "grafana" / "pai-launch.json"
METRIC_NAME = re.compile(r"\bpai_launch_[a-z_]+\b")
#: Grafana's variables, replaced by values PromQL accepts so each query can be checked as it would be sent.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$job": ".*", "$instance": ".*"}


def dashboard_queries(path: Path = DASHBOARD) -> list[str]:
    panels = json.loads(path.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def rule_expressions(path: Path = RULES) -> list[str]:
    """Each rule's `expr:` (one line each in the shipped file)."""
    return [line.split("expr:", 1)[1].strip() for line in path.read_text().splitlines()
            if line.strip().startswith("expr:")]


def as_promql(query: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        query = query.replace(variable, value)
    return query


def metric_names(expressions: list[str]) -> set[str]:
    return {name for expression in expressions for name in METRIC_NAME.findall(expression)}
