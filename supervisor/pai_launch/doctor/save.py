"""Which save folder the script writes into and which stage it resumes from, read statically where they can be, and
what the script does to that folder that breaks a resume (always loading latest, removing the folder)."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence

from pai_launch.doctor import names, save_args
from pai_launch.doctor.env import candidates, string_value
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.model import ERROR, WARNING, Finding

DEFAULT_SAVE = "PAI"  # what perforate_model uses without save_name (and without GPA.pc.set_save_name)


def _argument(call: ast.Call, position: int | None, keyword: str) -> ast.AST | None:
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if value is None and position is not None and len(call.args) > position:
        value = call.args[position]
    return value


def save_argument(flow: Flow) -> tuple[ast.AST | None, Event | None, str]:
    """(the expression the save folder is read from, the call whose names it is read with, ""), or (None, None,
    "default") where perforate_model's default applies, (None, None, "") where nothing can be read."""
    for event in flow.calls(lambda n: names.is_perforate(n) or names.is_training(n, "perforate_model")):
        helper = names.is_training(event.name, "perforate_model")
        argument = _argument(event.node, None if helper else 2, "save_name")
        if helper and any(k.arg is None for k in event.node.keywords) and argument is None:
            return None, None, ""
        if argument is None:
            setters = [e for e in flow.calls(lambda n: names.is_pc_setter(n, "save_name")) if e.order < event.order]
            if not setters:
                return None, None, "default"
            event, argument = setters[-1], setters[-1].node.args[0] if setters[-1].node.args else None
            if argument is None:
                return None, None, ""
        return argument, event, ""
    return None, None, ""


def save_name(flow: Flow) -> tuple[str | None, str]:
    """(folder, how it was read: "literal", "argparse" or "default"), or (None, "")."""
    argument, event, fallback = save_argument(flow)
    if argument is None:
        return (DEFAULT_SAVE, "default") if fallback == "default" else (None, "")
    value, how = string_value(argument, event.env, flow.options)
    if value == "":
        return DEFAULT_SAVE, "default"
    return value, how


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


def _resume(flow: Flow) -> tuple[str | None, Event | None]:
    """(the stage resume_stage says, the load_system call it was read from)."""
    if flow.calls(lambda n: names.is_training(n, "load_newest")):
        return "switch", None
    loads = flow.calls(names.is_load)
    resuming = [e for e in loads if "pai_load_folder" in ast.dump(_argument(e.node, 1, "folder") or ast.Pass())]
    for event in resuming + loads:
        argument = _argument(event.node, 2, "name")
        stage = _stage(argument, event) if argument is not None else None
        if stage:
            return stage, event
    if loads and any("switch_" in s and "*" in s for s in flow.strings):
        return "switch", None
    return None, None


def resume_stage(flow: Flow) -> str | None:
    """"switch" when the script loads the newest switch_N, "latest" for the latest stage, None if it cannot tell."""
    return _resume(flow)[0]


def check_resume_latest(flow: Flow) -> list[Finding]:
    """A DDP script that always resumes from latest redoes the restructure latest.pt was saved before (a single
    process restructures in place: no generation resumes, as check_resume says of a missing load)."""
    stage, event = _resume(flow)
    if stage != "latest" or any("switch_" in s for s in flow.strings) or not flow.is_ddp():
        return []
    return [Finding("resume-from-latest", WARNING, event.line,
                    "the script always resumes from latest: after a restructure latest.pt holds the model from before "
                    "the dendrites were added (the restructured one is in switch_N.pt), so the next generation "
                    "trains the old model and restructures at the same point again",
                    "load the newest switch_N from --pai_load_folder; load latest only when it is newer than that "
                    "switch file (what pai-launch --resume-from latest expects)", path=event.path)]


REMOVERS = ("rmtree", "rmdir", "removedirs")
SAVE_WORDS = re.compile(r"save|output|out_dir|pai", re.IGNORECASE)
FRESH_START_WORDS = re.compile(r"pai_load_folder|resume|exists|isdir|is_dir")


def _removed_folder(event: Event) -> ast.AST | None:
    """The folder a call removes: shutil.rmtree(X), os.rmdir(X), X.rmdir(), or `rm -r X` through a shell."""
    last = names.tail(event.name)
    call = event.node
    if last in REMOVERS and (event.name or "").split(".")[0] in ("shutil", "os", "pathlib"):
        return call.args[0] if call.args else None
    if last in REMOVERS and isinstance(call.func, ast.Attribute) and not call.args:
        return call.func.value
    if last in ("system", "run", "call", "check_call", "Popen", "check_output") and call.args:
        text = ast.unparse(call.args[0])
        if re.search(r"\brm\b.*-\w*r", text):
            return call.args[0]
    return None


def check_save_removed(flow: Flow) -> list[Finding]:
    """Removing the save folder on a start deletes the init run's settings, the switch files and pai-launch's own
    state (SAVE/.pai-launch): every start of the script is a fresh one."""
    save, _how = save_name(flow)
    perforates = flow.calls(lambda n: names.is_perforate(n) or names.is_training(n, "perforate_model"))
    save_arg = _argument(perforates[0].node, 2, "save_name") if perforates else None
    found = []
    for event in flow.calls(bool):
        folder = _removed_folder(event)
        if folder is None:
            continue
        value, _how = string_value(folder, event.env, flow.options)
        certain = (value is not None and save is not None and os.path.normpath(value) == os.path.normpath(save)) \
            or (save_arg is not None and ast.dump(folder) == ast.dump(save_arg))
        if not certain and (_is_subfolder(folder) or not any(SAVE_WORDS.search(w) for w in _words(folder))):
            continue
        sure_path = event.surely_reached(lambda g: bool(FRESH_START_WORDS.search(ast.unparse(g.node.test)))
                                         or _by_default(g, flow.options))
        found.append(Finding(
            "save-folder-removed", ERROR if certain and sure_path else WARNING, event.line,
            f"{ast.unparse(event.node)} removes the save folder: it deletes the init run's settings, the "
            "switch_N.pt files and pai-launch's state (SAVE/.pai-launch), so no generation can resume",
            "do not remove the save folder in the script (pai-launch --fresh moves an old one aside)",
            path=event.path))
    return found


def _by_default(guard, options: dict[str, object]) -> bool:
    """Whether the branch is the one taken while the script's own option keeps its default (`if not
    args.load_path:` with default None): pai-launch passes only its two flags."""
    test, positive = guard.node.test, guard.positive
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, positive = test.operand, not positive
    return isinstance(test, ast.Attribute) and test.attr in options and bool(options[test.attr]) == positive


def _is_subfolder(expr: ast.AST) -> bool:
    """os.path.join(save, "tmp"), save / "tmp": a folder inside, not the save folder itself."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div):
        return True
    return isinstance(expr, ast.Call) and names.tail(names.dotted(expr.func, {})) in ("join", "joinpath") \
        and len(expr.args) > 1


def _words(expr: ast.AST) -> list[str]:
    return [n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else str(n.value)
            for n in ast.walk(expr) if isinstance(n, (ast.Name, ast.Attribute))
            or isinstance(n, ast.Constant) and isinstance(n.value, str)]


CHECKS = (check_resume_latest, check_save_removed)


def check_save_name(flow: Flow, expected: str | None, script_args: Sequence[str] | None = None) -> list[Finding]:
    """The script's save folder against pai-launch's --save-name. Read from the script's own option, it is checked
    only with the arguments the script runs with (a launch passes them): without them, save_args.note says why
    not."""
    value, how = save_name(flow)
    given = None
    if how == "argparse":
        if script_args is None:
            return []
        given = _given(flow, script_args)
        value = given if given is not None else value
    if expected is None or value is None or os.path.normpath(value) == os.path.normpath(expected):
        return []
    read = {"literal": "save_name=", "argparse": "its option's default, which the script's arguments leave as it is",
            "default": "perforate_model's default"}[how]
    if how == "argparse" and given is not None:
        read = "its option, from the script's arguments"
    perforates = flow.calls(lambda n: names.is_perforate(n) or names.is_training(n, "perforate_model"))
    return [Finding("save-name-mismatch", ERROR, perforates[0].line if perforates else None,
                    f"the script saves into {value!r} ({read}), not {expected!r} (pai-launch --save-name)",
                    f"run pai-launch --save-name {value}, or have the script save into {expected!r}",
                    path=perforates[0].path if perforates else None)]


def _option(flow: Flow) -> str | None:
    """The dest of the argparse option the save folder is read from (`args.save` -> "save"), or None."""
    argument, event, _fallback = save_argument(flow)
    if argument is None:
        return None
    return next((value.attr for value, _scope in candidates(argument, event.env)
                 if isinstance(value, ast.Attribute) and value.attr in flow.options), None)


def _given(flow: Flow, script_args: Sequence[str]) -> str | None:
    """The save folder the script's arguments give its option, or None when they leave the default."""
    flags = save_args.option_flags(m.tree for m in flow.modules)
    dest = _option(flow)
    every = [f for found in flags.values() for f in found]
    return save_args.given(script_args, flags.get(dest, []), every) if dest is not None else None


def save_name_note(flow: Flow, expected: str | None, script_args: Sequence[str] | None) -> tuple[str, ...]:
    """Why the save folder was not checked against --save-name: it comes from the script's own option, and the
    arguments the script runs with are not known (`pai-launch doctor` alone; a launch knows them)."""
    value, how = save_name(flow)
    if expected is None or how != "argparse" or script_args is not None:
        return ()
    flags = save_args.option_flags(m.tree for m in flow.modules).get(_option(flow) or "", [])
    option = next((f for f in flags if f.startswith("--")), flags[0] if flags else "its option")
    if os.path.normpath(value) == os.path.normpath(expected):
        return ()
    return ((f"save folder: the script takes it from {option} (default {value!r}); whether that is pai-launch's "
            f"--save-name {expected!r} depends on the arguments the script runs with, which doctor cannot tell "
            "without (a launch checks them)"),)
