"""Whether a call writes the completion marker (.training_complete): open(..., "w"), touch/write_text, or a
replace/rename/copy onto it, with the file's name read through the names that hold it."""

from __future__ import annotations

import ast

from pai_launch.doctor import names
from pai_launch.doctor.env import Env, candidates

MARKER = ".training_complete"
MAX_DEPTH = 4  # names followed back to the string that holds the marker's name


def writes_marker(node: ast.Call, name: str | None, env: Env) -> bool:
    last = names.tail(name)
    if last == "open":
        mode = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "mode"), None)
        if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax")):
            return False
        return bool(node.args) and mentions_marker(node.args[0], env)
    if last in ("touch", "write_text", "write_bytes") and isinstance(node.func, ast.Attribute):
        return mentions_marker(node.func.value, env)
    if last in ("replace", "rename", "move", "copy", "copyfile") and len(node.args) > 1:
        return mentions_marker(node.args[1], env)
    return False


def mentions_marker(expr: ast.AST, env: Env | None, depth: int = 0) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MARKER in node.value:
            return True
        if isinstance(node, ast.Name) and depth < MAX_DEPTH:
            for value, scope in candidates(node, env):
                if value is not node and mentions_marker(value, scope, depth + 1):
                    return True
    return False
