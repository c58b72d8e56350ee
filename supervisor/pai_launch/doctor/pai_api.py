"""The names perforatedai has, for the check that a script calls none it lacks: GPA.pc's settings and methods, the
tracker's methods, utils_perforatedai's functions. Never imported: the installed package is found with find_spec
(which, for a top-level name, locates it without running it) and its Python sources read with ast; a compiled
package (3.2.9 ships Cython extensions), or none, falls back to the names bundled in perforatedai_api.json, which
scripts/pai_api_names.py wrote from an installed perforatedai (its version is in the file).
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from pai_launch.doctor.model import DoctorError
from pai_launch.doctor.source import parse_script

BUNDLED = Path(__file__).with_name("perforatedai_api.json")
MIN_SETTINGS = 10  # fewer set_ names read from a source install means the config class was not understood


@dataclass(frozen=True)
class Api:
    """One perforatedai's names; `how`: "installed" (read from its sources, or the bundled list of the same
    version), "bundled" (another version that cannot be read, or none, installed: the bundled list's), with
    `installed` the installed version."""

    version: str
    how: str
    pc: frozenset[str]
    tracker: frozenset[str]
    utils: frozenset[str]
    installed: str | None = None
    package: frozenset[str] | None = None  # what `perforatedai.X` reaches: its modules and __init__'s names
    answers: tuple[str, ...] = ()  # the GPA.pc prefixes its __getattr__ answers for any name (set_: a no-op)

    def described(self) -> str:
        """The version checked against, as a finding says it."""
        if self.how == "installed":
            return f"perforatedai {self.version} (installed)"
        if self.installed:
            return (f"perforatedai {self.version}'s names (the installed {self.installed} has no Python source doctor "
                    "can read)")
        return f"perforatedai {self.version}'s names (perforatedai is not installed here)"


def bundled(installed: str | None = None) -> Api:
    data = json.loads(BUNDLED.read_text())
    how = "installed" if installed == data["version"] else "bundled"
    package = frozenset(data["package"]) if "package" in data else None
    return Api(data["version"], how, frozenset(data["pc"]), frozenset(data["tracker"]), frozenset(data["utils"]),
               installed, package, tuple(data.get("answers", ())))


def _module_names(tree: ast.Module) -> set[str]:
    """What a module defines at its top level: defs, classes, assignments, imports."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
    return found


def _class_names(tree: ast.Module, name: str) -> set[str] | None:
    """A class's methods and attributes (`self.x = ...` anywhere in it), or None when the module has no such class."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            found = _module_names(ast.Module(body=node.body, type_ignores=[]))
            found.update(n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                         and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Store))
            return found
    return None


def _settings(config: set[str], tree: ast.Module) -> set[str]:
    """PAIConfig's set_X/get_X, which it adds for each of its variables (named in its attributes or as strings)."""
    words = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and n.value.isidentifier()}
    variables = {name.lstrip("_") for name in config} | words
    return config | {f"{prefix}_{v}" for v in variables for prefix in ("set", "get")}


def from_sources(folder: Path, version: str) -> Api | None:
    """The names read from a source install's files, or None when they are not there or not understood."""
    try:
        trees = {name: parse_script(folder / f"{name}_perforatedai.py") for name in ("globals", "tracker", "utils")}
    except DoctorError:
        return None
    config = _class_names(trees["globals"], "PAIConfig")
    tracker = _class_names(trees["tracker"], "PAINeuronModuleTracker")
    if config is None or tracker is None:
        return None
    settings = _settings(config, trees["globals"])
    if sum(name.startswith("set_") for name in settings) < MIN_SETTINGS:
        return None
    return Api(version, "installed", frozenset(settings), frozenset(tracker), frozenset(_module_names(trees["utils"])),
               package=_package(folder), answers=_answers(trees["globals"]))


def _package(folder: Path) -> frozenset[str] | None:
    """The names `perforatedai.X` can reach: the package's modules and what its __init__.py defines."""
    try:
        init = _module_names(parse_script(folder / "__init__.py"))
    except DoctorError:
        return None
    modules = {path.name.split(".")[0] for path in folder.iterdir() if path.suffix in (".py", ".so", ".pyd")} - {
        "__init__"}
    return frozenset(init | modules | {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()})


def _answers(tree: ast.Module) -> tuple[str, ...]:
    """The prefixes PAIConfig.__getattr__ answers for any name: `if name.startswith("set_"): return ...`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            for branch in (n for n in ast.walk(node) if isinstance(n, ast.If)):
                test = branch.test
                if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) \
                        and test.func.attr == "startswith" and len(test.args) == 1 \
                        and isinstance(test.args[0], ast.Constant) and isinstance(test.args[0].value, str) \
                        and any(isinstance(n, ast.Return) for n in branch.body):
                    found.append(test.args[0].value)
    return tuple(found)


def _installed() -> tuple[Path | None, str | None]:
    """(the installed perforatedai's folder, its version), each None when not found; nothing is imported."""
    try:
        spec = importlib.util.find_spec("perforatedai")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    try:
        version = importlib.metadata.version("perforatedai")
    except (importlib.metadata.PackageNotFoundError, OSError, ValueError):  # none, or metadata that cannot be read
        version = None
    return (Path(folders[0]) if folders else None), version


@functools.lru_cache(maxsize=1)
def api() -> Api:
    """The names to check against, read once per process."""
    folder, version = _installed()
    if folder is not None:
        read = from_sources(folder, version or "unknown")
        if read is not None:
            return read
    return bundled(version if folder is not None else None)
