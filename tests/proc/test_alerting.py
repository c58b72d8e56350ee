"""The shipped alert rules pass promtool's check and their own unit tests (each alert fires on the history it is for
and stays quiet on a healthy run), and every dashboard query parses as PromQL."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.alerting import RULE_TESTS, RULES, as_promql, dashboard_queries

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(shutil.which("promtool") is None,
                                 reason="promtool missing: apt-get install prometheus (scripts/system_tools.sh does)")]


def promtool(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=50, cwd=cwd)


def test_the_alert_rules_pass_promtool_check_and_their_unit_tests():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0 and "SUCCESS: 5 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_dashboard_query_parses_as_promql(tmp_path):
    """Each query (Grafana's variables filled in) as a recording rule: promtool parses every expression."""
    queries = dashboard_queries()
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for number, query in enumerate(queries):
        lines += [f"      - record: dashboard_query_{number}", f"        expr: '{as_promql(query)}'"]
    rules = tmp_path / "dashboard-rules.yaml"
    rules.write_text("\n".join(lines) + "\n")
    checked = promtool("check", "rules", str(rules))
    assert checked.returncode == 0 and f"SUCCESS: {len(queries)} rules found" in checked.stdout, \
        checked.stdout + checked.stderr
