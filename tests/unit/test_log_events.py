"""The log's event names are one vocabulary (wire.log_events): every name the supervisor writes and every name a
reader (status, the metrics, the live line) handles is defined there, and writers name them through its constants."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pai_launch.status import story as status_story
from pai_launch.wire import log_events

PACKAGE = Path(__file__).resolve().parents[2] / "supervisor" / "pai_launch"
WRITERS = ("supervise", "cli", "core", "placement")
READERS = ("status/events.py", "status/story.py", "status/summary.py", "supervise/outputs/metrics.py",
           "supervise/outputs/liveline.py")
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "msg"}
SNAKE = re.compile(r"^[a-z]+(_[a-z]+)+$")


def _log_calls(tree: ast.AST):
    """(line, first argument) of each call that logs an event: log.<level>(NAME, ...) or log(NAME, ...), and of each
    (NAME, {fields}) pair made to be logged later (the warnings a run starts with)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[1], ast.Dict):
            yield node.lineno, node.elts[0]
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name) and node.func.value.id.endswith("notes") and node.args
                and isinstance(node.args[0], ast.Tuple) and node.args[0].elts):
            yield node.lineno, node.args[0].elts[0]
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
                if isinstance(first, ast.Attribute) and isinstance(first.value,
                                                                   ast.Name) and first.value.id == "log_events":
                    assert hasattr(log_events,
                                   first.attr), f"{path.relative_to(PACKAGE)}:{line}: log_events.{first.attr}"
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
    assert set(status_story.PROBLEM_EVENTS) <= log_events.ALL


def test_status_handles_only_events_that_are_logged_and_says_which_when_not():
    assert status_story.unknown_handlers() == [] and status_story.unreached_handlers() == []

    class Stale(status_story.Story):
        def on_generation_finished(self, event, now, session):  # an old name for generation_ended
            pass

    stale_key = {**status_story.HANDLERS, "generation_finished": status_story.Story.on_generation_ended}
    stale_name = {**status_story.HANDLERS, log_events.GENERATION_ENDED: Stale.on_generation_finished}
    assert status_story.unknown_handlers(stale_key) == ["generation_finished"]
    assert status_story.unknown_handlers(stale_name) == ["generation_finished"]
    assert status_story.unreached_handlers(Stale) == ["on_generation_finished"]


def test_the_vocabulary_is_plain_snake_case_names_each_defined_once():
    constants = {name: value for name, value in vars(log_events).items() if name.isupper() and isinstance(value, str)}
    assert all(SNAKE.match(value) and name == value.upper() for name, value in constants.items())
    assert len(set(constants.values())) == len(constants) == len(log_events.ALL)


# --- the fields: declared once, written and read as declared ------------------------------------------
FIELD_READERS = ("status/events.py", "status/story.py", "supervise/outputs/metrics.py", "supervise/outputs/liveline.py")
ANY_FIELD = frozenset().union(log_events.COMMON, *(event.fields for event in log_events.EVENTS.values()))


def _events_named(node: ast.expr, module) -> frozenset[str] | None:
    """The events an expression names: log_events.X, a tuple of them, or a module constant holding them."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "log_events":
        return frozenset({getattr(log_events, node.attr)})
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        found = [_events_named(element, module) for element in node.elts]
        return None if None in found else frozenset().union(*found)
    if isinstance(node, ast.Name) and isinstance(getattr(module, node.id, None), (tuple, frozenset, set)):
        return frozenset(getattr(module, node.id)) & log_events.ALL or None
    return None


def _key_read(node: ast.AST) -> str | None:
    """The field an expression reads from `event`: event.get("k"), event["k"], "k" in event."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "event" and node.args
            and isinstance(node.args[0], ast.Constant)):
        return node.args[0].value
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "event"
            and isinstance(node.slice, ast.Constant)):
        return node.slice.value
    if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and isinstance(node.ops[0], ast.In)
            and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id == "event"):
        return node.left.value
    return None


def _reads(tree: ast.AST, module) -> list[tuple[int, str, frozenset[str] | None]]:
    """(line, field, the events it is read for; None: any) for every field a reader reads from an event."""
    found = []

    def visit(node: ast.AST, context: frozenset[str] | None) -> None:
        key = _key_read(node)
        if key is not None:
            found.append((node.lineno, key, context))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name[3:] in log_events.ALL:
            context = frozenset({node.name[3:]})
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name) \
                and node.test.left.id == "name" and isinstance(node.test.ops[0], (ast.Eq, ast.In)):
            named = _events_named(node.test.comparators[0], module)
            visit(node.test, context)
            for child in node.body:
                visit(child, named if named is not None else context)
            for child in node.orelse:
                visit(child, context)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, context)

    visit(tree, None)
    return found


def _module_of(relative: str):
    import importlib
    return importlib.import_module("pai_launch." + relative.removesuffix(".py").replace("/", "."))


def test_every_field_a_reader_reads_is_one_its_event_declares():
    undeclared = []
    for relative in FIELD_READERS:
        module = _module_of(relative)
        for line, key, events in _reads(ast.parse((PACKAGE / relative).read_text()), module):
            declared = ANY_FIELD if events is None else frozenset(log_events.COMMON).union(
                *(log_events.EVENTS[name].fields for name in events))
            if key not in declared:
                undeclared.append(f"{relative}:{line}: {key!r} (for {sorted(events) if events else 'any event'})")
    assert undeclared == []
    assert len([read for relative in FIELD_READERS
                for read in _reads(ast.parse((PACKAGE / relative).read_text()), _module_of(relative))]) > 40


def test_status_shows_problems_by_fields_their_events_declare():
    for name, keys in status_story.PROBLEM_EVENTS.items():
        assert set(keys) <= log_events.EVENTS[name].fields | log_events.COMMON, name


def test_the_field_check_finds_a_renamed_field():
    source = ("def on_generation_started(self, event, now, session):\n    event.get('generation_number')\n"
              "def observe(event):\n    if name == log_events.RUN_FINISHED:\n        event['exit']\n"
              "    elif name == log_events.INIT_EXITED:\n        event['exit']\n")
    reads = _reads(ast.parse(source), log_events)
    assert reads == [(2, "generation_number", frozenset({"generation_started"})),
                     (5, "exit", frozenset({"run_finished"})), (7, "exit", frozenset({"init_exited"}))]
    assert "generation_number" not in log_events.GENERATION_STARTED.fields
    assert "exit" not in log_events.RUN_FINISHED.fields and "exit" in log_events.INIT_EXITED.fields


def test_a_record_outside_the_vocabulary_is_named():
    assert log_events.undeclared({"event": "run_started", "time": "t", "script": "train.py", "run_id": "r"}) == []
    assert log_events.undeclared({"event": "run_started", "scripts": "train.py"}) == [
        "run_started: field 'scripts' is not declared"]
    assert log_events.undeclared({"event": "run_begun"}) == ["unknown event 'run_begun'"]


def test_every_generation_end_and_dendrite_verdict_carries_only_declared_fields():
    """The report functions build the fields of the events that say most; every branch of them is declared."""
    from pai_launch.core import reports
    from pai_launch.core.events import GenerationEnded, JobStopped
    from pai_launch.core.failure import Failure
    from pai_launch.core.machine import ended_report, start
    from pai_launch.wire import failure_causes

    tail = "RuntimeError: Default process group has not been initialized"
    assert failure_causes.known_cause(tail) is not None
    state = start(save_name="PAI")
    ends = [GenerationEnded(complete=False, progressed=("switch_2.pt",), now=1.0),
            GenerationEnded(complete=False, progressed=(), now=1.0, failures=(Failure.worker(1, 3, tail),)),
            GenerationEnded(complete=False, progressed=(), now=1.0, fatal="the agent could not start"),
            GenerationEnded(complete=False, progressed=(), now=1.0, stopped=JobStopped(15, "node 1 stopped"),
                            failures=(Failure.worker(0, 2, tail),))]
    said = (reports.generation_end(ended_report(state, end)) for end in ends)
    records = [{"event": name, **fields} for name, fields in said]
    records += [{"event": name, **fields} for name, fields in (reports.dendrite_verdict(2, 1, 2, ("switch_2.pt",)),
                                                                 reports.dendrite_verdict(2, 2, 1, ("switch_2.pt",)))]
    assert {record["event"] for record in records} >= {"generation_ended", "generation_failed", "generation_stopped",
                                                        "dendrites_added", "dendrites_rejected"}
    assert [problem for record in records for problem in log_events.undeclared(record)] == []


def test_every_line_an_agent_gets_for_its_account_of_itself_carries_only_declared_fields():
    """agent_ready (warm, cold), warm_workers_refused (asked for cold workers, refused, gone cold) and
    forkserver_restarted: each branch of core.reports.agent_started_line is declared."""
    from pai_launch.core import reports
    from pai_launch.core.observations import AgentStarted
    from pai_launch.wire.protocol import AgentReady

    accounts = [
        AgentStarted(7, AgentReady(warm=True, preloaded=("torch",), missing=("x",), forkserver=9, took_s=1.5,
                                   why="fell back", torch="2.13.0", python="3.11.7"), 1.0),
        AgentStarted(7, AgentReady(warm=False, why="--cold", torch="2.13.0"), 1.0),
        AgentStarted(7, AgentReady(warm=False, why="no forkserver here"), 1.0),
        AgentStarted(7, AgentReady(warm=False, why="the self-check failed"), 1.0, went_cold=True),
        AgentStarted(7, AgentReady(warm=True, forkserver=11), 1.0, restarted_why="the forkserver had died"),
    ]
    lines = [reports.agent_started_line(account) for account in accounts]

    assert [(warning, name) for warning, name, _ in lines] == [
        (False, "agent_ready"), (False, "agent_ready"), (True, "warm_workers_refused"), (True, "warm_workers_refused"),
        (True, "forkserver_restarted")]
    records = [{"event": name, **fields} for _, name, fields in lines]
    assert [problem for record in records for problem in log_events.undeclared(record)] == []
