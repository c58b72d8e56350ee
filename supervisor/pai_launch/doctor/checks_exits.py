"""The exits the protocol needs: the init run's exit after save_tracker_settings and every rank's exit at a restructure
or at the end. A script (or a helper it calls, often one meant to keep PerforatedAI's pdb.set_trace() from stopping a
run) that replaces sys.exit, builtins.exit or builtins.quit with something that returns makes each of them fall
through: the init run trains on, and a restructured generation goes on with the old DDP wrapper.

Takes the walked Flow and returns Findings; no side effects.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import names
from pai_launch.doctor.branches import ends_process
from pai_launch.doctor.env import candidates, function_of, name_in
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.model import ERROR, WARNING, Finding

#: the exits a script may replace, as doctor names them, and the call each one is
EXITS = {"sys.exit": "sys.exit", "builtins.exit": "exit", "builtins.quit": "quit",
         "__builtins__.exit": "exit", "__builtins__.quit": "quit"}

FIX = ("leave the exits alone: to keep PerforatedAI's pdb.set_trace() from stopping a run, set PYTHONBREAKPOINT=0 "
       "or patch only builtins.breakpoint and pdb.set_trace")


def is_failure_exit(event: Event) -> bool:
    """sys.exit(1), sys.exit("message"), raise SystemExit(2): the process fails there; it does not end a
    generation the way the protocol's exit 0 does."""
    call = event.node.exc if isinstance(event.node, ast.Raise) else event.node
    if not (isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant)):
        return False
    code = call.args[0].value
    return isinstance(code, str) or (isinstance(code, int) and not isinstance(code, bool) and code != 0)


def _assignments(flow: Flow) -> dict[int, ast.AST]:
    """id(assignment target) -> the value assigned, for every `X.attr = value` in the files read."""
    found = {}
    for module in flow.modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Assign):
                found.update((id(target), node.value) for target in node.targets)
    return found


def _replaced(event: Event, values: dict[int, ast.AST]) -> tuple[str, ast.AST] | None:
    """(the exit replaced, the value put in its place) when the event assigns one of EXITS, directly or through
    setattr(sys, "exit", value)."""
    if event.kind == "assign" and event.name in EXITS and id(event.node) in values:
        return event.name, values[id(event.node)]
    if event.kind == "call" and event.name in ("setattr", "builtins.setattr") and len(event.node.args) == 3:
        owner, attribute, value = event.node.args
        if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str):
            name = f"{name_in(owner, event.env)}.{attribute.value}"
            if name in EXITS:
                return name, value
    return None


def _returns(value: ast.AST, event: Event) -> bool:
    """Whether what replaces the exit surely returns instead of ending the process: a lambda or def that does not
    end in an exit, or a constant. False when doctor cannot read it (another exit, a library's function)."""
    held = list(candidates(value, event.env))
    if not held:
        return False
    for expr, scope in held:
        if isinstance(expr, ast.Constant):
            continue
        if isinstance(expr, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            found = (expr, scope)
        else:
            found = function_of(expr, scope) if isinstance(expr, (ast.Name, ast.Attribute)) else None
        if found is None:
            return False
        function, closure = found
        if isinstance(function, ast.Lambda):
            body = ast.Expr(function.body)
            if ends_process(body, closure) or isinstance(function.body, ast.Call) and names.is_exit(
                    name_in(function.body.func, closure)):
                return False
            continue
        if any(isinstance(node, ast.Raise) for node in ast.walk(function)) or (
                function.body and ends_process(function.body[-1], closure)):
            return False
    return True


def _caller(flow: Flow, event: Event) -> Event | None:
    """The call that entered the function the event is in: the last event before it one level up."""
    return next((e for e in reversed(flow.events[:event.order]) if e.depth == event.depth - 1 and e.kind == "call"),
                None) if event.depth else None


def _relied_on(flow: Flow) -> set[str]:
    """The exits the script's own calls go through: sys.exit (also inside pai_launch.training's helpers), exit, quit."""
    called = {e.name for e in flow.calls(lambda n: n in ("sys.exit", "exit", "quit") or names.is_generation_end(n)
                                         or names.is_training(n, "init_run_done"))}
    return {name if name in ("exit", "quit") else "sys.exit" for name in called}


def check_exits_disabled(flow: Flow) -> list[Finding]:
    """One finding per place the exits the script calls, or sys.exit (PerforatedAI's own), are replaced: at the call
    of the helper that does it, or at the assignment. An error where an exit the script calls surely falls through,
    a warning under a condition doctor cannot read or where only PerforatedAI's failures exit that way; nothing
    where only a plain single process (neither the init run nor a DDP rank) gets there."""
    values = _assignments(flow)
    called = _relied_on(flow)
    relied_on = called | {"sys.exit"}  # PerforatedAI's own: sys.exit(-1) after pdb.set_trace() on a fatal problem
    places: dict[int, tuple[Event, list[tuple[Event, str]]]] = {}
    for event in flow.events:
        replaced = _replaced(event, values)
        if replaced is None or EXITS[replaced[0]] not in relied_on or not _returns(replaced[1], event):
            continue
        if event.mode.init is False and event.mode.dist is False:
            continue
        caller = _caller(flow, event) if not event.detached else None
        at = caller or event
        how = f"{replaced[0]} = {ast.unparse(replaced[1])}" if event.kind == "assign" else ast.unparse(event.node)
        entry = places.setdefault(id(at.node), (at, []))
        if all(e.node is not event.node for e, _how in entry[1]):
            entry[1].append((event, how))
    found = []
    for at, replaced in places.values():
        mine = [(event, how) for event, how in replaced if EXITS[_replaced(event, values)[0]] in called]
        sure = bool(mine) and any(event.surely_reached() for event, _how in mine) and at.surely_reached()
        first = replaced[0][0]
        what = "; ".join(how for _event, how in replaced)
        where = "" if at is first else f" ({names.tail(at.name)}() does it at {first.path}:{first.line})"
        why = ("every exit the protocol needs falls through, so the init run trains on after save_tracker_settings() "
               "and the ranks go on after a restructure") if mine else \
            ("PerforatedAI's own sys.exit on a fatal problem (after a pdb.set_trace()) falls through, so a rank that "
             "should stop, and fail the generation for a retry, trains on in a broken state or hangs the others")
        found.append(Finding("exits-disabled", ERROR if sure else WARNING, at.line,
                             f"{what} replaces the exit with something that returns{where}: {why}", FIX,
                             path=at.path))
    return found


CHECKS = (check_exits_disabled,)
