"""Which save folder the script writes into and which stage it resumes from, read statically where they can be."""

from __future__ import annotations

import ast
import os

from pai_launch import doctor_names as names
from pai_launch.doctor_env import candidates, string_value
from pai_launch.doctor_flow import Flow
from pai_launch.doctor_model import ERROR, WARNING, Finding

DEFAULT_SAVE = "PAI"  # what perforate_model uses without save_name (and without GPA.pc.set_save_name)


def _argument(call: ast.Call, position: int | None, keyword: str) -> ast.AST | None:
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if value is None and position is not None and len(call.args) > position:
        value = call.args[position]
    return value


def save_name(flow: Flow) -> tuple[str | None, str]:
    """(folder, how it was read: "literal", "argparse" or "default"), or (None, "")."""
    for event in flow.calls(lambda n: names.is_perforate(n) or names.is_training(n, "perforate_model")):
        helper = names.is_training(event.name, "perforate_model")
        argument = _argument(event.node, None if helper else 2, "save_name")
        if helper and any(k.arg is None for k in event.node.keywords) and argument is None:
            return None, ""
        if argument is None:
            setters = [e for e in flow.calls(lambda n: names.is_pc_setter(n, "save_name")) if e.order < event.order]
            if not setters:
                return DEFAULT_SAVE, "default"
            event, argument = setters[-1], setters[-1].node.args[0] if setters[-1].node.args else None
            if argument is None:
                return None, ""
        value, how = string_value(argument, event.env, flow.options)
        if value == "":
            return DEFAULT_SAVE, "default"
        return value, how
    return None, ""


def _stage(expr: ast.AST, event) -> str | None:
    for value, _scope in candidates(expr, event.env):
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return "latest" if value.value == "latest" else "switch" if value.value.startswith("switch_") else None
        text = ""
        if isinstance(value, ast.JoinedStr) and value.values and isinstance(value.values[0], ast.Constant):
            text = str(value.values[0].value)
        elif isinstance(value, ast.BinOp) and isinstance(value.left, ast.Constant):
            text = str(value.left.value)
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and isinstance(value.func.value, ast.Constant):
            text = str(value.func.value.value)
        if text.startswith("switch_"):
            return "switch"
    return None


def resume_stage(flow: Flow) -> str | None:
    """"switch" when the script loads the newest switch_N, "latest" for the latest stage, None if it cannot tell."""
    if flow.calls(lambda n: names.is_training(n, "load_newest")):
        return "switch"
    loads = flow.calls(names.is_load)
    resuming = [e for e in loads if "pai_load_folder" in ast.dump(_argument(e.node, 1, "folder") or ast.Pass())]
    for event in resuming + loads:
        argument = _argument(event.node, 2, "name")
        stage = _stage(argument, event) if argument is not None else None
        if stage:
            return stage
    if loads and any("switch_" in s and "*" in s for s in flow.strings):
        return "switch"
    return None


def check_save_name(flow: Flow, expected: str | None) -> list[Finding]:
    value, how = save_name(flow)
    if expected is None or value is None or os.path.normpath(value) == os.path.normpath(expected):
        return []
    read = {"literal": "save_name=", "argparse": "its option's default", "default": "perforate_model's default"}[how]
    severity = WARNING if how == "argparse" else ERROR
    perforates = flow.calls(lambda n: names.is_perforate(n) or names.is_training(n, "perforate_model"))
    return [Finding("save-name-mismatch", severity, perforates[0].line if perforates else None,
                    f"the script saves into {value!r} ({read}), not {expected!r} (pai-launch --save-name)",
                    f"run pai-launch --save-name {value}, or have the script save into {expected!r}")]
