"""Where the thing a run names lives, found without running or importing any of it: the script's file, the file
`python -m MODULE` would run, or the program `--no-python` would start. Preflight checks it exists; doctor reads it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from importlib.machinery import PathFinder
from pathlib import Path

from pai_launch.placement.spec import MODULE, PROGRAM, LaunchSpec, PreflightError


def python_file(spec: LaunchSpec) -> Path | None:
    """The Python file the run's processes start in (None: a program that is not Python, or a module not found)."""
    if spec.runs_as == PROGRAM:
        return None
    if spec.runs_as == MODULE:
        return module_file(str(spec.script), spec.workdir)
    return spec.script if spec.script.is_absolute() else spec.workdir / spec.script


def module_file(name: str, workdir: Path) -> Path | None:
    """The file `python -m NAME` runs from `workdir` (a package's __main__.py), found on the path python would search
    (the working directory first) without importing a package: a package's __init__ may be slow or start things."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    found = PathFinder.find_spec(parts[0], [str(workdir), *(entry for entry in sys.path[1:] if entry)])
    if found is None:
        found = _installed(parts[0])
    for part in parts[1:]:
        if found is None or found.submodule_search_locations is None:
            return None
        found = PathFinder.find_spec(part, list(found.submodule_search_locations))
    if found is not None and found.submodule_search_locations is not None:
        found = PathFinder.find_spec("__main__", list(found.submodule_search_locations))
    if found is None or not found.has_location or not found.origin:
        return None
    return Path(found.origin)


def _installed(top: str):
    """A top-level module found by an installed finder (an editable install's), which never imports anything."""
    try:
        return importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None


def check_exists(spec: LaunchSpec, env: dict[str, str]) -> None:
    """PreflightError naming the script, module or program that the run could not start."""
    if spec.runs_as == MODULE:
        if module_file(str(spec.script), spec.workdir) is None:
            raise PreflightError(f"-m {spec.script}: no such module from {spec.workdir} or this Python's path "
                                 "(a package needs a __main__.py): check the name, or give the script's path without "
                                 "-m")
        return
    if spec.runs_as == PROGRAM:
        _check_program(spec, env)
        return
    script = python_file(spec)
    if not script.exists():
        raise PreflightError(f"script {spec.script} does not exist: check the path (relative to {spec.workdir})")
    if not script.is_file():
        raise PreflightError(f"script {spec.script} is not a file: give the training script's path")


def _check_program(spec: LaunchSpec, env: dict[str, str]) -> None:
    name = spec.script_text or str(spec.script)
    if "/" not in name:
        if shutil.which(name, path=env.get("PATH", os.defpath)) is None:
            raise PreflightError(f"--no-python {name}: no such program on PATH: give its path (e.g. ./{name}) or "
                                 f"add its folder to PATH")
        return
    path = spec.script if spec.script.is_absolute() else spec.workdir / spec.script
    if not path.is_file():
        raise PreflightError(f"--no-python {name} is not a file: check the path (relative to {spec.workdir})")
    if not os.access(path, os.X_OK):
        raise PreflightError(f"--no-python {name} is not executable: chmod +x {name}, or run it with python (drop "
                             f"--no-python)")
