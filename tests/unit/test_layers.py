"""The package's layers as a test: each subpackage imports only what its process and layer allow.

Every import in every module is read with ast (the ones inside functions too: a lazy import still runs in that
process); imports under `if TYPE_CHECKING:` are for annotations only and are not counted. The rules are those each
subpackage's `__init__` docstring states, and the "How it is built" table of the manual
(docs/contributors/architecture.md) shows.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "supervisor" / "pai_launch"
STDLIB = set(sys.stdlib_module_names)

#: part -> the parts of pai_launch it may import ("" is the top-level package itself: its __version__).
MAY_IMPORT: dict[str, set[str]] = {
    "wire": {"wire"},
    "savefmt": {"wire", "savefmt", ""},
    "linux": {"wire", "savefmt", "linux"},
    "core": {"wire", "savefmt", "core"},
    "placement": {"wire", "savefmt", "core", "placement"},
    "supervise": {"", "wire", "savefmt", "linux", "core", "placement", "supervise", "doctor"},
    "cli": {"", "wire", "savefmt", "linux", "core", "placement", "supervise", "cli", "doctor", "fix", "status",
            "envreport"},
    "agent": {"wire", "savefmt", "linux", "agent", "store.client", "forkserver"},
    "forkserver": {"forkserver"},
    "store": {"wire", "savefmt", "linux", "store"},
    "doctor": {"doctor"},
    "fix": {"doctor", "fix"},
    "status": {"wire", "savefmt", "status"},
    "envreport": {"linux", "envreport", "backends"},
    "entry": {"cli", "core", "supervise"},
    "__main__": {"entry"},
    "torchrun": {"entry"},
    "training": {"savefmt", "in_process", "backends"},
    "in_process": {"savefmt", "backends"},
    "backends": set(),
    "__init__": set(),
}

#: supervise's groups -> the groups each may import. The loop sits on top and drives the rest; lower groups never
#: import the loop, outputs sit at the bottom (everything writes through them) and job's commands import none.
SUPERVISE_GROUPS: dict[str, set[str]] = {
    "loop": {"loop", "children", "folder", "outputs", "job"},
    "children": {"children", "outputs", "job"},
    "folder": {"folder", "outputs", "job"},
    "outputs": {"outputs"},
    "job": {"job"},
}

#: part -> third-party packages it may import (everything else outside the stdlib is refused).
THIRD_PARTY: dict[str, set[str]] = {
    "linux": {"psutil"},
    "supervise": {"psutil", "structlog", "watchdog", "prometheus_client"},
    "cli": {"typer", "click"},
    "agent": {"torch", "psutil"},
    "store": {"torch"},
    "status": {"psutil", "matplotlib"},
    "envreport": {"torch"},
    "training": {"torch", "perforatedai"},
    "in_process": {"torch"},
    "backends": {"torch"},
    "fix": {"libcst"},
}

#: The pure core decides; it never touches the OS or reads the clock (time arrives on events as `now`). Placement is
#: held to the same: it reads the values the command line and the environment gave, never the machine itself.
PURE_PARTS = {"core", "placement"}
CORE_REFUSED = {"os", "subprocess", "socket", "time", "datetime", "threading", "shutil", "tempfile", "fcntl",
                "resource", "uuid", "random", "select", "selectors", "multiprocessing", "psutil"}


def part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def group_of(path: Path) -> str | None:
    """The group of supervise a module sits in ("loop", "children", ...), None outside supervise."""
    relative = path.relative_to(PACKAGE)
    return relative.parts[1] if relative.parts[0] == "supervise" and len(relative.parts) > 2 else None


def target_group(dotted: str) -> str | None:
    """The group of supervise a dotted name points into, None outside supervise or for the package itself."""
    parts = dotted.split(".")
    return parts[2] if parts[:2] == ["pai_launch", "supervise"] and len(parts) > 2 else None


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) for each module the file imports at run time."""
    tree = ast.parse(path.read_text(), filename=str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if _under_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            assert node.level == 0, f"{path}:{node.lineno}: a relative import; the house imports by absolute name"
            # `from pai_launch import entry` and `from pai_launch.store import client` name modules: count each.
            if node.module in ("pai_launch",) \
                    or (node.module or "").count(".") == 1 and node.module.startswith("pai_launch."):
                found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
            else:
                found.append((node.lineno, node.module or ""))
    return found


def target_of(dotted: str) -> str | None:
    """The part of pai_launch a dotted name points into ("store.client" is its own target), or None if outside."""
    parts = dotted.split(".")
    if parts[0] != "pai_launch":
        return None
    if len(parts) == 1 or parts[1] == "__version__":
        return ""
    if parts[1] == "store" and len(parts) > 2 and parts[2] == "client":
        return "store.client"
    return parts[1]


def allowed(part: str, target: str) -> bool:
    rules = MAY_IMPORT[part]
    return target in rules or (target == "store.client" and "store" in rules)


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        part = part_of(path)
        assert part in MAY_IMPORT, f"{path}: a module outside every known part; add its rules here and to its __init__"
        group = group_of(path)
        if part == "supervise" and path.name != "__init__.py":
            assert group in SUPERVISE_GROUPS, f"{path}: a supervise module outside its groups; put it in one"
        for line, dotted in imports_of(path):
            where = f"{path.relative_to(PACKAGE)}:{line}"
            target = target_of(dotted)
            top = dotted.split(".")[0]
            if target is not None:
                if not allowed(part, target):
                    found.append(f"{where}: {part} may not import pai_launch.{target or '__init__'} ({dotted})")
                elif group is not None and (other := target_group(dotted)) is not None \
                        and other not in SUPERVISE_GROUPS[group]:
                    found.append(f"{where}: supervise.{group} may not import supervise.{other} ({dotted})")
            elif top not in STDLIB and top not in THIRD_PARTY.get(part, set()):
                found.append(f"{where}: {part} may not import {top}")
            elif part in PURE_PARTS and top in CORE_REFUSED:
                found.append(f"{where}: the pure {part} may not import {top} (an OS layer or the clock)")
    return found


def test_every_import_keeps_to_its_layer():
    assert violations() == []


def test_every_subpackage_init_is_empty_but_for_its_docstring_naming_its_process():
    """The forkserver, warm workers and training scripts import these packages: an __init__ that imports would
    drag its modules into the user's processes."""
    for init in sorted([*PACKAGE.glob("*/__init__.py"), *PACKAGE.glob("*/*/__init__.py")]):
        tree = ast.parse(init.read_text())
        docstring = ast.get_docstring(tree)
        assert docstring and "Runs in" in docstring, f"{init}: say which process runs this part"
        assert len(tree.body) == 1, f"{init}: nothing but the docstring"


@pytest.mark.parametrize("edge, part, expected", [
    ("pai_launch.core.machine", "supervise", True),
    ("pai_launch.agent.main", "supervise", False),
    ("pai_launch.store.client", "agent", True),
    ("pai_launch.store.server", "agent", False),
    ("pai_launch.status.gather", "supervise", False),
    ("pai_launch.supervise.loop.runner", "status", False),
    ("pai_launch.core.events", "agent", False),
    ("pai_launch.placement.spec", "core", False),
    ("pai_launch.core.state", "placement", True),
    ("pai_launch.placement.nodes", "supervise", True),
    ("pai_launch", "savefmt", True),
])
def test_the_rules_refuse_what_they_should(edge, part, expected):
    """The checker itself can fail: a forbidden edge is seen as one."""
    assert allowed(part, target_of(edge)) is expected


def test_a_forbidden_import_inside_a_function_is_seen(tmp_path, monkeypatch):
    """Lazy imports run too: one inside a function body is an edge like any other."""
    fake = tmp_path / "pai_launch"
    (fake / "core").mkdir(parents=True)
    (fake / "core" / "__init__.py").write_text('"""Runs in the supervisor."""\n')
    (fake / "core" / "bad.py").write_text(
        "def later():\n    import time\n    from pai_launch.supervise.loop import runner\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    found = violations()
    assert any("core may not import pai_launch.supervise" in v for v in found), found
    assert any("may not import time" in v for v in found), found


@pytest.mark.parametrize("edge, group, expected", [
    ("pai_launch.supervise.loop.runner", "children", False),
    ("pai_launch.supervise.loop.effects", "outputs", False),
    ("pai_launch.supervise.children.threads", "loop", True),
    ("pai_launch.supervise.job.plan", "children", True),
    ("pai_launch.supervise.children.proctable", "folder", False),
])
def test_the_groups_of_supervise_keep_the_loop_on_top(edge, group, expected):
    assert (target_group(edge) in SUPERVISE_GROUPS[group]) is expected


def test_every_supervise_group_has_its_rules_and_its_init():
    groups = {path.parent.name for path in (PACKAGE / "supervise").glob("*/__init__.py")}
    assert groups == set(SUPERVISE_GROUPS)
    assert [path.name for path in (PACKAGE / "supervise").glob("*.py")] == ["__init__.py"]


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def _modules_imported(dotted: str, modules: set[str]) -> str | None:
    """The package's module a dotted import name reaches (`pai_launch.supervise.folder.logspace`, or the module a
    `from pai_launch.savefmt.pai_files import folder_facts` name lives in), None outside the package."""
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def import_cycles() -> list[list[str]]:
    """The package's import cycles between modules, lazy imports counted (a cycle that only a function-level import
    hides still ties the two modules together)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {name: {target for _, dotted in imports_of(path)
                    if (target := _modules_imported(dotted, set(paths))) not in (None, name)
                    and not paths[target].name == "__init__.py"}
             for name, path in paths.items()}
    cycles, done = [], set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            cycles.append(trail[trail.index(name):] + [name])
            return
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, trail + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return cycles


def test_no_module_imports_itself_back_through_others():
    assert import_cycles() == []


def test_the_save_format_takes_plain_values_not_even_annotating_with_the_command_lines_spec():
    """savefmt is read by training scripts and tools alike: a type from core there would tie its functions to the shape
    of the command line (a TYPE_CHECKING import is still that tie, though no import runs)."""
    assert [path.name for path in (PACKAGE / "savefmt").glob("*.py") if "pai_launch.core" in path.read_text()] == []
