"""The log's event names are one vocabulary (wire.log_events): every name the supervisor writes and every name a
reader (status, the metrics, the live line) handles is defined there, and writers name them through its constants."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pai_launch.status import events as status_events
from pai_launch.wire import log_events

PACKAGE = Path(__file__).resolve().parents[2] / "supervisor" / "pai_launch"
WRITERS = ("supervise", "cli", "core")
READERS = ("status/events.py", "status/summary.py", "supervise/metrics.py", "supervise/liveline.py")
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "msg"}
SNAKE = re.compile(r"^[a-z]+(_[a-z]+)+$")


def _log_calls(tree: ast.AST):
    """(line, first argument) of each call that logs an event: log.<level>(NAME, ...) or log(NAME, ...)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in LEVELS or name == "log":
                yield node.lineno, node.args[0]


def test_writers_name_every_event_through_the_vocabulary():
    literal = []
    for part in WRITERS:
        for path in sorted((PACKAGE / part).rglob("*.py")):
            for line, first in _log_calls(ast.parse(path.read_text())):
                if isinstance(first, ast.Constant) and isinstance(first.value, str) and SNAKE.match(first.value):
                    literal.append(f"{path.relative_to(PACKAGE)}:{line}: {first.value!r}")
                if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) and first.value.id == "log_events":
                    assert hasattr(log_events, first.attr), f"{path.relative_to(PACKAGE)}:{line}: log_events.{first.attr}"
    assert literal == [], "write these through pai_launch.wire.log_events"


def test_every_name_a_reader_compares_an_event_with_is_one_pai_launch_logs():
    """A literal compared with an event's name in a reader must be a logged event (a renamed one fails here)."""
    stray = []
    for relative in READERS:
        tree = ast.parse((PACKAGE / relative).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "name":
                for comparator in node.comparators:
                    values = comparator.elts if isinstance(comparator, (ast.Tuple, ast.List, ast.Set)) else [comparator]
                    stray += [f"{relative}:{node.lineno}: {v.value!r}" for v in values
                              if isinstance(v, ast.Constant) and v.value not in log_events.ALL]
    assert stray == []
    assert set(status_events.PROBLEM_EVENTS) <= log_events.ALL


def test_status_handles_only_events_that_are_logged_and_says_which_when_not():
    assert status_events.unknown_handlers() == []

    class Stale(status_events._Reader):
        def on_generation_finished(self, event, now, session):  # an old name for generation_ended
            pass

    assert status_events.unknown_handlers(Stale) == ["generation_finished"]


def test_the_vocabulary_is_plain_snake_case_names_each_defined_once():
    constants = {name: value for name, value in vars(log_events).items() if name.isupper() and isinstance(value, str)}
    assert all(SNAKE.match(value) and name == value.upper() for name, value in constants.items())
    assert len(set(constants.values())) == len(constants) == len(log_events.ALL)
