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
                                 (names.UTILS, "UPA.", api.utils),
                                 ("perforatedai.", "perforatedai.", api.package)):
        rest = name[len(prefix):] if name.startswith(prefix) else ""
        if rest and "." not in rest and known is not None and rest not in known and rest not in NAMED_ELSEWHERE:
            return shown + rest, rest
    return None


def answered(call: str, api: pai_api.Api) -> bool:
    """A GPA.pc call the config answers for any name (3.2.9: set_ and append_, with a no-op): hasattr says True and
    nothing raises, so neither guards it."""
    return call.startswith("GPA.pc.") and call[len("GPA.pc."):].startswith(api.answers) if api.answers else False


def _finding(call: str, events: list[Event], api: pai_api.Api, caught: bool = False,
             also: list[str] | None = None) -> Finding:
    sites = _by_call(events)
    sure = [e for e in events if e.surely_reached()]
    first = (sure or events)[0]
    ignored = answered(call, api) or not api.answers and call.startswith("GPA.pc.set_")
    what = "PerforatedAI ignores the setting (it prints \"Ignoring set attempt.\"), and the run goes on " \
        "without it" if ignored else "the call raises AttributeError"
    if caught and not ignored:
        what += ", which the try around it catches: what it guards never runs with this release"
        what += f" (nor {', '.join(also)}, also missing, after it)" if also else ""
    return Finding("perforatedai-api-missing", WARNING if ignored or caught or not sure else ERROR, first.line,
                   f"{call} is not in {api.described()}: {what}" + _more(len(sites) - 1, "call"),
                   "use the name this release has (a setting's name is its GPA.pc.set_<name>; see perforatedai's "
                   "configuration_descriptions.json), or install the release the script was written for",
                   first.path)


CATCHES = ("AttributeError", "Exception", "BaseException")


def _defended(flow: Flow) -> dict[int, ast.Try]:
    """The nodes inside a try whose handlers catch AttributeError (or Exception, or anything), each with the
    innermost such try: a script that calls a name some releases lack that way expects it may be missing."""
    found: dict[int, ast.Try] = {}
    for module in flow.modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Try) and any(
                    h.type is None or any(names.tail(ast.unparse(t)) in CATCHES for t in
                                          (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]))
                    for h in node.handlers):
                found.update((id(inner), node) for stmt in node.body for inner in ast.walk(stmt))
    return found


def _asked(event: Event, attribute: str) -> bool:
    """Whether an if around the call asks for the name first: `if hasattr(GPA.pc, "set_x"):` (not `if not
    hasattr(...): raise ...`, which fails where the name is missing, as the call would)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("hasattr", "getattr")
               and any(isinstance(a, ast.Constant) and a.value == attribute for a in n.args)
               for guard in event.guards if isinstance(guard.node, ast.If)
               and not (guard.leaves and guard.node.body and isinstance(guard.node.body[-1], ast.Raise))
               for n in ast.walk(guard.node.test))


def check_api_missing(flow: Flow, api: pai_api.Api | None = None) -> list[Finding]:
    """One finding per missing name, at its first call (one doctor is sure runs, where there is one); none for a
    call the script asks for first (hasattr), a warning for one in a try that catches the AttributeError (it does
    not crash, but what it guards never runs). A GPA.pc name the config answers for any name is neither: hasattr
    says True and nothing raises."""
    calls = flow.calls(lambda n: bool(n) and n.startswith("perforatedai."))
    if not calls:
        return []
    known = api or pai_api.api()
    defended = _defended(flow)
    missing: dict[str, list[Event]] = {}
    caught: dict[int, dict[str, list[Event]]] = {}  # per try: its first missing name raises, the rest never run
    for event in calls:
        found = lookup(event.name, known)
        if found is None:
            continue
        if answered(found[0], known):
            missing.setdefault(found[0], []).append(event)
        elif not _asked(event, found[1]):
            held = defended.get(id(event.node))
            into = missing if held is None else caught.setdefault(id(held), {})
            into.setdefault(found[0], []).append(event)
    found = [_finding(call, events, known) for call, events in missing.items()]
    for in_try in caught.values():
        left = {call: events for call, events in in_try.items() if call not in missing}
        if left:
            first = min(left, key=lambda call: min(e.order for e in left[call]))
            found.append(_finding(first, left[first], known, caught=True, also=[c for c in left if c != first]))
    return found


CHECKS = (check_api_missing,)
