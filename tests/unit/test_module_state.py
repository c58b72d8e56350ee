"""No module holds state of its own: what a process knows lives in objects that are made and handed down, so each
test makes its own and nothing leaks from one run (or test) into the next.

Read with ast over the whole package: a module-level name bound to a mutable container (a list, set, lock, event,
queue, or a dict whose name is not a CONSTANT), a `global` statement, and an in-place change of a module's
CONSTANT (append, add, item assignment...) all fail here, but for the few facts that belong to the process itself,
listed with why."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "supervisor" / "pai_launch"

#: (module, name) -> why that state is the process's own, not a run's.
PROCESS_STATE = {
    ("agent/teardown.py", "_grace"): "the grace patched into torch's classes is process-wide",
    ("agent/teardown.py", "_patch_lock"): "guards that one process-wide patch",
    ("agent/teardown.py", "_stopping"): "torch's classes, patched process-wide, note the workers they stop",
    ("agent/teardown.py", "_signalled"): "torch's classes, patched process-wide, ask whether pai-launch signalled the "
                                         "generation's workers",
    ("forkserver/server_hooks.py", "SERVER_THREADS"): "the forkserver's own thread count after its preload",
    ("forkserver/server_hooks.py", "MASK_BEFORE"): "the forkserver's own signal mask before it held the stop signals",
    ("supervise/outputs/console.py", "_lock"): "the process's stdout and stderr are process-wide",
    ("supervise/outputs/console.py", "_lost"): "which of the process's own streams failed",
    ("supervise/outputs/console.py", "_listener"): "who hears of the process's own streams failing",
    ("wire/codec.py", "_PROTOCOL_OF"): "filled as message classes are defined (at import), read-only after",
}
MUTABLE_CALLS = {"set", "list", "dict", "deque", "defaultdict", "OrderedDict", "Event", "Lock", "RLock", "Condition",
                 "Queue", "SimpleQueue"}
MUTATORS = {"append", "add", "update", "extend", "insert", "pop", "popitem", "clear", "remove", "discard", "setdefault"}


def _is_constant(name: str) -> bool:
    bare = name.lstrip("_")
    return bare.isupper() or (bare.startswith("__") and bare.endswith("__")) or name == "__all__"


def _mutable(value: ast.expr, name: str) -> bool:
    if isinstance(value, (ast.List, ast.Set, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return not _is_constant(name)
    if isinstance(value, ast.Call):
        func = value.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return called in MUTABLE_CALLS
    return False


def _module_state(path: Path) -> list[tuple[str, int, str]]:
    """(name, line, what) for every piece of module state in one file."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, int, str]] = []
    module_names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in (t for t in targets if isinstance(t, ast.Name)):
                module_names.add(target.id)
                if target.id != "__all__" and _mutable(node.value, target.id):
                    found.append((target.id, node.lineno, "a mutable container at module level"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found += [(name, node.lineno, "rebound through `global`") for name in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
              and isinstance(node.func.value, ast.Name) and node.func.value.id in module_names
              and _is_constant(node.func.value.id)):
            found.append((node.func.value.id, node.lineno, f"a constant changed in place (.{node.func.attr})"))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                        and target.value.id in module_names and _is_constant(target.value.id)):
                    found.append((target.value.id, node.lineno, "a constant changed in place (item assignment)"))
    return found


def test_no_module_holds_state_but_the_processes_own():
    problems, seen = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for name, line, what in _module_state(path):
            seen.add((module, name))
            if (module, name) not in PROCESS_STATE:
                problems.append(f"{module}:{line}: {name}: {what}: keep it in an object that is handed down")
    assert not problems, "\n".join(problems)
    assert not set(PROCESS_STATE) - seen, f"listed but no longer there: {sorted(set(PROCESS_STATE) - seen)}"


def test_the_check_finds_each_kind_of_module_state(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import threading\nSTOP_RECEIVED: list = []\n_current = None\n_seen = {}\nTABLE = {'a': 1}\n"
        "_lock = threading.Lock()\nNAMES = ('a',)\n"
        "def f():\n    global _current\n    _current = 1\n    STOP_RECEIVED.append(1)\n    TABLE['b'] = 2\n")
    kinds = {(name, what.split(" (")[0]) for name, _, what in _module_state(sample)}
    assert kinds == {
        ("STOP_RECEIVED", "a mutable container at module level"), ("_seen", "a mutable container at module level"),
        ("_lock", "a mutable container at module level"), ("_current", "rebound through `global`"),
        ("STOP_RECEIVED", "a constant changed in place"), ("TABLE", "a constant changed in place"),
    }
