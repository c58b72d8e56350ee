"""Calls into PerforatedAI by a name the installed release lacks (doctor.pai_api): a GPA.pc setting from another
release (`GPA.pc.set_when_to_switch_mode`), a tracker method or a utils_perforatedai function. A missing set_ is
ignored by PerforatedAI (it prints "Variable '<name>' does not exist.  Ignoring set attempt."), so the run goes on
without the setting; anything else raises AttributeError.

Takes the walked Flow and returns Findings; no side effects besides reading perforatedai's names once.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import names, pai_api
from pai_launch.doctor.checks_api import _by_call, _more
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.model import ERROR, WARNING, Finding

#: calls another check already names (checks_api: initialize_pai, initialize_dendrites)
NAMED_ELSEWHERE = frozenset({"initialize_pai", "initialize_dendrites"})


def lookup(name: str | None, api: pai_api.Api) -> tuple[str, str] | None:
    """(the call as a script writes it, the missing name) when `name` is a PerforatedAI call `api` lacks."""
    if not name or "()" in name:
        return None
    for prefix, shown, known in ((names.GLOBALS + "pc.", "GPA.pc.", api.pc),
                                 (names.GLOBALS + "pai_tracker.", "GPA.pai_tracker.", api.tracker),
                                 (names.UTILS, "UPA.", api.utils)):
        rest = name[len(prefix):] if name.startswith(prefix) else ""
        if rest and "." not in rest and rest not in known and rest not in NAMED_ELSEWHERE:
            return shown + rest, rest
    return None


def _finding(call: str, events: list[Event], api: pai_api.Api) -> Finding:
    sites = _by_call(events)
    sure = [e for e in events if e.surely_reached()]
    first = (sure or events)[0]
    ignored = call.startswith("GPA.pc.set_")
    what = "PerforatedAI ignores the setting (it prints \"Ignoring set attempt.\"), and the run goes on " \
        "without it" if ignored else "the call raises AttributeError"
    return Finding("perforatedai-api-missing", WARNING if ignored or not sure else ERROR, first.line,
                   f"{call} is not in {api.described()}: {what}" + _more(len(sites) - 1, "call"),
                   "use the name this release has (a setting's name is its GPA.pc.set_<name>; see perforatedai's "
                   "configuration_descriptions.json), or install the release the script was written for",
                   first.path)


CATCHES = ("AttributeError", "Exception", "BaseException")


def _defended(flow: Flow) -> set[int]:
    """The nodes inside a try whose handlers catch AttributeError (or Exception, or anything): a script that
    calls a name some releases lack that way expects it may be missing."""
    found: set[int] = set()
    for module in flow.modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Try) and any(
                    h.type is None or any(names.tail(ast.unparse(t)) in CATCHES for t in
                                          (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]))
                    for h in node.handlers):
                found.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return found


def _asked(event: Event, attribute: str) -> bool:
    """Whether an if around the call asks for the name first: `if hasattr(GPA.pc, "set_x"):`."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("hasattr", "getattr")
               and any(isinstance(a, ast.Constant) and a.value == attribute for a in n.args)
               for guard in event.guards if isinstance(guard.node, ast.If) for n in ast.walk(guard.node.test))


def check_api_missing(flow: Flow, api: pai_api.Api | None = None) -> list[Finding]:
    """One finding per missing name, at its first call (one doctor is sure runs, where there is one); none for a
    call the script guards (hasattr first, or a try that catches AttributeError)."""
    calls = flow.calls(lambda n: bool(n) and n.startswith("perforatedai."))
    if not calls:
        return []
    known = api or pai_api.api()
    defended = _defended(flow)
    missing: dict[str, list[Event]] = {}
    for event in calls:
        found = lookup(event.name, known)
        if found is not None and id(event.node) not in defended and not _asked(event, found[1]):
            missing.setdefault(found[0], []).append(event)
    return [_finding(call, events, known) for call, events in missing.items()]


CHECKS = (check_api_missing,)
