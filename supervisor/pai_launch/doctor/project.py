"""The script's own files: which imports resolve to a file of the project, so that helpers (`utils/ddp_utils.py`, a
model package's `perforate_model` wrapper) are read as the script's code and not skipped.

A module resolves when it is a file (or a package's `__init__.py`) under the script's folder, under a `sys.path`
entry the script adds in a way readable without running it (`sys.path.insert(0, 'src')`,
`sys.path.append(os.path.dirname(__file__) + '/..')`, `Path(__file__).parent.parent`), or relative to the importing
file (`from .utils import setup`). Each file is parsed once; one that cannot be parsed is left out and said why, and one
that cannot be read at all (doctor.source: not a regular file, too large, binary) is skipped with a note, never a
reason to stop: only the script itself must be readable.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from pai_launch.doctor import names
from pai_launch.doctor.budget import UNLIMITED, Deadline
from pai_launch.doctor.model import DoctorError
from pai_launch.doctor.source import Unreadable, os_problem, parse_script, refusal

MAX_FOLLOW = 6  # re-exports followed (`utils/__init__.py: from .ddp import setup`)

#: libraries whose calls never hold the script's own set-up (they are not looked for in the project)
LIBRARIES = ("torch", "torchvision", "torchaudio", "perforatedai", "pai_launch", "numpy", "pandas", "tqdm", "wandb",
             "matplotlib", "sklearn", "scipy", "PIL", "cv2", "transformers", "datasets", "timm", "yaml", "tensorboard",
             "mmcv", "mmengine", "mmaction", "mmdet", "mmseg", "lightning", "pytorch_lightning", "accelerate",
             "einops", "albumentations", "hydra", "omegaconf", "safetensors", "huggingface_hub", "segment_anything")

#: a call's last name that suggests it holds DDP or PerforatedAI set-up (worth saying it was not followed)
SETUP_WORDS = re.compile(r"ddp|dist|pai|perforat|setup|init|train|optim|resume|load|wrap|model|parallel|checkpoint|"
                         r"save|fit|main|run|prepare|build", re.IGNORECASE)


@dataclass(eq=False)  # one per file: compared and hashed by identity
class Module:
    """One file of the project: its dotted name (as the script imports it), where it is, its AST and imports."""

    name: str
    path: Path
    shown: str
    tree: ast.Module
    imports: dict[str, str]


class Project:
    """The entry script and the files of the project its imports reach, each parsed once."""

    def __init__(self, script: str | Path, deadline: Deadline = UNLIMITED):
        self.script = Path(script)
        self.deadline = deadline
        tree = parse_script(script)  # first: a path that cannot be read is refused before anything else looks at it
        self.folder = real(self.script).parent
        self.entry = self._module("__main__", real(self.script), str(script), tree)
        self.roots = [self.folder] + [p for p in added_paths(self.entry.tree, self.folder) if p != self.folder]
        self.by_path: dict[Path, Module] = {self.entry.path: self.entry}
        self.by_name: dict[str, Module] = {}
        self.broken: dict[str, str] = {}  # dotted module -> why it could not be read
        self.missing: set[str] = set()  # dotted names no file of the project is
        self.skipped: dict[str, str] = {}  # a file the imports reach that cannot be read -> why (one line)
        self._add_relative_imports(self.entry)

    def _module(self, name: str, path: Path, shown: str, tree: ast.Module) -> Module:
        return Module(name, path, shown, tree, names.import_map(tree))

    @property
    def modules(self) -> list[Module]:
        return list(self.by_path.values())

    def _show(self, path: Path) -> str:
        if self.script.is_absolute():
            return str(path)
        return os.path.relpath(path)

    def _load(self, name: str, path: Path) -> Module | None:
        path = real(path)
        if path in self.by_path:
            self.by_name.setdefault(name, self.by_path[path])
            return self.by_path[path]
        self.deadline.check()
        try:
            tree = parse_script(path)
        except DoctorError as exc:
            self.broken[name] = str(exc)
            if isinstance(exc, Unreadable):
                self.skipped.setdefault(self._show(path), str(exc))
            return None
        module = self._module(name, path, self._show(path), tree)
        self.by_path[path] = self.by_name[name] = module
        self._add_relative_imports(module)
        return module

    def _file(self, folder: Path, dotted: str) -> Path | None:
        """The file Python would import for `dotted` under `folder` (a regular file, as its import system wants).
        When there is none but a name is there that is no such file (a FIFO, a device, a symlink loop), that is
        noted as skipped: the import fails on it."""
        base = folder.joinpath(*dotted.split("."))
        candidates = (base.with_name(base.name + ".py"), base / "__init__.py")
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        for candidate in candidates:
            if os.path.lexists(candidate) and not candidate.is_dir():
                shown = self._show(candidate)
                self.skipped.setdefault(shown, _refused(candidate, shown))
        return None

    def find(self, dotted: str) -> Module | None:
        """The project's module imported as `dotted` (absolute), or None when no file of the project is it."""
        if dotted in self.by_name:
            return self.by_name[dotted]
        if dotted in self.broken or dotted in self.missing:
            return None
        for root in self.roots:
            path = self._file(root, dotted)
            if path is not None and real(path) != self.entry.path:
                return self._load(dotted, path)
        self.missing.add(dotted)
        return None

    def _add_relative_imports(self, module: Module) -> None:
        """`from . import x`, `from .utils import setup`: names for the files they reach, in the module's imports."""
        for node in ast.walk(module.tree):
            if not (isinstance(node, ast.ImportFrom) and node.level > 0):
                continue
            folder = module.path.parent
            for _ in range(node.level - 1):
                folder = folder.parent
            base = f"{module.name}:{'.' * node.level}{node.module or ''}"
            target = self._file(folder, node.module) if node.module else folder / "__init__.py"
            parent = self._load(base, target) if target is not None and target.is_file() else None
            for alias in node.names:
                sub = self._file(folder.joinpath(*(node.module or "").split(".")), alias.name)
                if sub is not None:
                    self._load(f"{base}.{alias.name}", sub)
                elif parent is None:
                    self.broken.setdefault(base, f"no file in the project for {'.' * node.level}{node.module or ''}")
                module.imports[alias.asname or alias.name] = f"{base}.{alias.name}"

    def function(self, dotted: str | None, depth: int = 0) -> tuple[ast.AST, Module] | None:
        """The top-level def that a dotted call name reaches in the project's files (following re-exports)."""
        module, rest = self.split(dotted)
        if module is None or len(rest) != 1 or depth > MAX_FOLLOW:
            return None
        for stmt in module.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == rest[0]:
                return stmt, module
        again = module.imports.get(rest[0])
        return self.function(again, depth + 1) if again and again != dotted else None

    def split(self, dotted: str | None) -> tuple[Module | None, list[str]]:
        """(the longest leading part of `dotted` that is a project module, the names after it)."""
        parts = (dotted or "").split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = self.find(".".join(parts[:cut]))
            if module is not None:
                return module, parts[cut:]
        return None, parts

    def why_unresolved(self, dotted: str | None, imports: dict[str, str]) -> str | None:
        """Why a call that likely holds set-up could not be followed, or None when it does not matter."""
        if not dotted or not SETUP_WORDS.search(names.tail(dotted.replace("()", ""))):
            return None
        imported = next((path for path in imports.values() if dotted == path or dotted.startswith(path + ".")), None)
        if imported is None:  # not a name the file imports
            return None
        broken = next((why for name, why in self.broken.items() if dotted.startswith(name + ".")), None)
        if broken is not None or ":" in dotted:  # a relative import: always the project's
            return broken
        module, rest = self.split(dotted)
        if module is not None:
            found = next((s for s in module.tree.body if isinstance(s, ast.ClassDef) and s.name == rest[0]), None)
            return f"a class of {module.shown}: not followed" if found is not None else None
        top = dotted.split(".")[0]
        if top in sys.stdlib_module_names or top in LIBRARIES or _installed(top):
            return None
        parts = dotted.split(".")
        named = self._imported_modules()
        module_name = next((".".join(parts[:cut]) for cut in range(len(parts), 0, -1)
                            if ".".join(parts[:cut]) in named), top)
        return f"no file in the project for {module_name}"

    def _imported_modules(self) -> set[str]:
        """The modules the files read name in their import statements (`from X import y`: X; `import X`: X)."""
        found = set()
        for module in self.modules:
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module)
                elif isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
        return found


def real(path: Path) -> Path:
    """The path with its symlinks resolved; a symlink loop stays as it is (Path.resolve raises RuntimeError on one
    before Python 3.13), and reading it says what it is."""
    return Path(os.path.realpath(path))


def _refused(path: Path, shown: str) -> str:
    """Why a name that is there is no file to read (what it is, or the error a stat gives)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return os_problem(shown, exc)
    return refusal(shown, info.st_mode, info.st_size) or f"{shown}: cannot read"


def _installed(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def added_paths(tree: ast.Module, folder: Path) -> list[Path]:
    """The folders the script puts on sys.path (sys.path.append / insert / +=), where they can be read."""
    values: dict[str, ast.AST] = {}
    found: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = node.value
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                and node.func.attr in ("append", "insert") and names.dotted(node.func.value, {}) == "sys.path"):
            continue
        text = path_value(node.args[-1], folder, values)
        if text is None:
            continue
        # a relative entry is relative to where the script is started: its folder, or the folder doctor runs in
        for path in [Path(text)] if os.path.isabs(text) else [folder / text, Path.cwd() / text]:
            if path.is_dir() and real(path) not in found:
                found.append(real(path))
    return found


def path_value(expr: ast.AST, folder: Path, values: dict[str, ast.AST], depth: int = 0) -> str | None:
    """The path an expression names, relative to the script's folder where it is relative, or None."""
    if depth > 8:
        return None
    again = lambda e: path_value(e, folder, values, depth + 1)  # noqa: E731
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id == "__file__":
            return str(folder / "__script__")
        return again(values[expr.id]) if expr.id in values else None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Div)):
        left, right = again(expr.left), again(expr.right)
        if left is None or right is None:
            return None
        return left + right if isinstance(expr.op, ast.Add) else os.path.join(left, right)
    if isinstance(expr, ast.Attribute) and expr.attr == "parent":
        inner = again(expr.value)
        return None if inner is None else os.path.dirname(os.path.normpath(inner))
    if isinstance(expr, ast.Call):
        callee = names.dotted(expr.func, {}) or ""
        last = names.tail(callee)
        if last in ("dirname",) and expr.args:
            inner = again(expr.args[0])
            return None if inner is None else os.path.dirname(os.path.normpath(inner))
        if last == "join" and expr.args:
            parts = [again(a) for a in expr.args]
            return None if None in parts else os.path.join(*parts)
        if last in ("abspath", "realpath", "normpath", "str", "Path", "resolve", "absolute", "expanduser", "fspath"):
            target = expr.args[0] if expr.args else expr.func.value if isinstance(expr.func, ast.Attribute) else None
            return None if target is None else again(target)
        if last == "getcwd":
            return os.getcwd()
    return None
