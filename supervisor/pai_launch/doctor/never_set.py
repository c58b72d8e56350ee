"""`elif hasattr(args, "rank"): pass` in torchvision's init_distributed_mode: on the script's argparse namespace,
an attribute that no option declares and nothing assigned before the if is never there, so that branch is never
taken and the chain's `else: return` still keeps a plain process (the init run) away from what follows.

Pure: reads the walked Flow.
"""

from __future__ import annotations

import ast

from pai_launch.doctor.branches import after_leaving
from pai_launch.doctor.env import candidates
from pai_launch.doctor.flow import Event, Flow, Guard

PARSE = ("parse_args", "parse_known_args")


def _namespace(expr: ast.AST, event: Event) -> bool:
    """Whether the expression holds what argparse's parse_args() returned."""
    for value, _scope in candidates(expr, event.env):
        call = value.value if isinstance(value, ast.Subscript) else value  # parse_known_args()[0]
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in PARSE:
            return True
    return False


def _chain(stmt: ast.If) -> set[int]:
    """The ifs of an if/elif chain."""
    found, node = set(), stmt
    while True:
        found.add(id(node))
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        return found


def never_there(flow: Flow, event: Event, stmt: ast.If):
    """A test that reads `hasattr(NAMESPACE, "attr")` where no option has that dest and no assignment to it comes
    before the chain (other than in its own branches)."""
    chain = _chain(stmt)
    first = min((e.order for e in flow.events if any(id(g.node) in chain for g in e.guards)), default=event.order)

    def dead(test: ast.AST) -> bool:
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "hasattr"
                and len(test.args) == 2 and isinstance(test.args[1], ast.Constant)):
            return False
        attribute = test.args[1].value
        if not isinstance(attribute, str) or attribute in flow.options or not _namespace(test.args[0], event):
            return False
        return not any(e.kind == "assign" and (e.name or "").endswith("." + attribute) and e.order < first
                       for e in flow.events)
    return dead


def leaving_guard(flow: Flow, event: Event) -> Guard | None:
    """What the chains the event comes after leave for it, read again with their never-taken hasattr branches out:
    one Guard whose meaning holds for the event, or None when that changes nothing."""
    for guard in event.guards:
        if guard.leaves and isinstance(guard.node, ast.If):
            again = after_leaving(guard.node, event.env, never_there(flow, event, guard.node))
            if again is not None and again.meaning != guard.meaning:
                return again
    return None
