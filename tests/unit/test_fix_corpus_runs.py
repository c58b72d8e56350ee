"""scripts/fix_corpus.py --run: how a fixed project's run under pai-launch ended, read from its JSON log lines."""

from __future__ import annotations

import json

import pytest

from tests.helpers import load_script

pytestmark = pytest.mark.timeout(30)


def _lines(*events: dict) -> str:
    return "\n".join(json.dumps(e) for e in events)


def test_a_run_that_exits_0_completed():
    fix_corpus = load_script("fix_corpus")
    assert fix_corpus.stop_reason(0, _lines({"event": "run_finished", "reason": "training complete"})) == "completed"


def test_a_failed_run_names_its_exit_the_closing_reason_and_the_last_error_line():
    fix_corpus = load_script("fix_corpus")
    output = "\n".join([
        "Traceback (most recent call last):",
        _lines({"event": "init_output_tail", "level": "error", "log_line": "ImportError: first"},
               {"event": "init_output_tail", "level": "error", "log_line": "ModuleNotFoundError: No module 'x'"},
               {"event": "generation_started", "level": "info", "log_line": "not an error"},
               {"event": "run_finished", "level": "error", "reason": "init run failed with exit code 1"}),
        "[1, 2]",
    ])
    assert fix_corpus.stop_reason(3, output) == (
        "exit 3; init run failed with exit code 1; ModuleNotFoundError: No module 'x'")


def test_a_run_with_no_log_lines_still_names_its_exit():
    assert load_script("fix_corpus").stop_reason(2, "usage: pai-launch ...") == "exit 2"
