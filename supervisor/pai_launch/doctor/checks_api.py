"""Checks that the script calls PerforatedAI by names its 3.x releases have: older tutorials and forks use the 1.x
modules (`pb_globals`, `pb_utils`, ...) and `initialize_pai`, which fail at import or at the first call. And that it
calls none of the single-process demo API (`perforate_model(..., demo_mode=True)`, `initialize_dendrites`), which
pai-launch's DDP ranks cannot run: the dendrites it adds are frozen when wrapped and never synchronised.

The names are those of the perforatedai release pai-launch is tested with; doctor never imports the package.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import names
from pai_launch.doctor.checks_setup import in_ddp
from pai_launch.doctor.env import candidates
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.guards import is_turn
from pai_launch.doctor.model import ERROR, WARNING, Finding

#: perforatedai's modules (3.x).
MODULES = frozenset({"blockwise_perforatedai", "clean_perforatedai", "configure_perforatedai", "globals_perforatedai",
                     "library_perforatedai", "modules_perforatedai", "network_perforatedai", "tracker_perforatedai",
                     "utils_perforatedai"})


def _perforatedai_modules(tree: ast.Module) -> list[tuple[str, int]]:
    """(perforatedai submodule, line) for each import that names one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[1], node.lineno) for alias in node.names
                      if alias.name.startswith("perforatedai.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "perforatedai":
                found += [(alias.name, node.lineno) for alias in node.names]
            elif node.module.startswith("perforatedai."):
                found.append((node.module.split(".")[1], node.lineno))
    return found


def _more(count: int, what: str) -> str:
    """"(N more calls in the project)": N counts places in the code (call sites), not the paths that reach them."""
    return f" ({count} more {what}{'' if count == 1 else 's'} in the project)" if count else ""


def check_legacy_modules(flow: Flow) -> list[Finding]:
    """One finding, at the first such import: one port fixes them all."""
    legacy = [(module, name, line) for module in flow.modules
              for name, line in _perforatedai_modules(module.tree) if name not in MODULES]
    if not legacy:
        return []
    module, name, line = legacy[0]
    return [Finding("perforatedai-legacy-api", ERROR, line,
                    f"perforatedai has no module {name} (a name from its 1.x releases): the import fails"
                    + _more(len(legacy) - 1, "such import"),
                    "port to the 3.x API: from perforatedai import globals_perforatedai as GPA, utils_perforatedai "
                    "as UPA (GPA.pai_tracker, UPA.perforate_model)", module.shown)]


def check_initialize_pai(flow: Flow) -> list[Finding]:
    """One finding, at the first call (an error when doctor is sure the script gets there)."""
    calls = [e for e in flow.events if e.kind == "call" and e.name == names.UTILS + "initialize_pai"]
    if not calls:
        return []
    sure = [e for e in calls if e.surely_reached()]
    first = (sure or calls)[0]
    return [Finding("initialize-pai-removed", ERROR if sure else WARNING, first.line,
                    "UPA.initialize_pai is not in perforatedai 3.x: the call raises AttributeError"
                    + _more(len(_by_call(calls)) - 1, "call"),
                    "call UPA.perforate_model(model) instead", first.path)]


DEMO_FIX = ("under pai-launch call UPA.perforate_model(model) without demo_mode and let the tracker add dendrites; "
            "demo mode is for a single process")


def _certain(event: Event) -> bool:
    """An error only where doctor is sure a DDP rank gets here (a rank's turn in a loop over the ranks counts); a
    warning under a condition it cannot read, or in the init run or a single-process branch only."""
    return in_ddp(event) and event.surely_reached(lambda g: g.positive and is_turn(g.node.test, event.env))


def _demo_values(event: Event) -> list[ast.AST]:
    """What the call passes for demo_mode: the keyword, or the key of a readable **dict / dict(...) splat."""
    call = event.node
    values = [k.value for k in call.keywords if k.arg == "demo_mode"]
    for splat in (k.value for k in call.keywords if k.arg is None):
        for held, _scope in candidates(splat, event.env):
            if isinstance(held, ast.Dict):
                values += [v for k, v in zip(held.keys, held.values)
                           if isinstance(k, ast.Constant) and k.value == "demo_mode"]
            elif isinstance(held, ast.Call) and isinstance(held.func, ast.Name) and held.func.id == "dict":
                values += [k.value for k in held.keywords if k.arg == "demo_mode"]
    return values


def _demo_mode(event: Event) -> bool | None:
    """True: demo_mode is surely on; None: it may be (a value doctor cannot read, or True on one path only); False:
    off, or not passed."""
    held = [(value, scope) for given in _demo_values(event) for value, scope in candidates(given, event.env)]
    if not held:
        return False
    truths = [value.value if isinstance(value, ast.Constant) and isinstance(value.value, bool) else None
              for value, _scope in held]
    if all(t is True for t in truths):
        return True
    return False if all(t is False for t in truths) else None


def _by_call(events: list[Event]) -> list[list[Event]]:
    """The events grouped by the call they are (a call in a helper is met once per path into it), in order."""
    groups: dict[int, list[Event]] = {}
    for event in events:
        groups.setdefault(id(event.node), []).append(event)
    return list(groups.values())


def check_demo_mode(flow: Flow) -> list[Finding]:
    """Each perforate_model call with demo_mode on (pai_launch.training.perforate_model hands its keywords on)."""
    found = []
    for events in _by_call(flow.calls(lambda n: names.is_perforate(n) or names.is_training(n, "perforate_model"))):
        demo = {_demo_mode(e) for e in events}
        if demo == {False}:
            continue
        sure = True in demo and any(_certain(e) for e in events)
        found.append(Finding("perforate-model-demo-mode", ERROR if sure else WARNING, events[0].line,
                             "perforate_model(..., demo_mode=True) is PerforatedAI's single-process demo: under "
                             "DDP its dendrites are frozen when wrapped and never synchronised between ranks",
                             DEMO_FIX, events[0].path))
    return found


def check_initialize_dendrites(flow: Flow) -> list[Finding]:
    found = []
    for events in _by_call(flow.calls(lambda n: n == names.UTILS + "initialize_dendrites")):
        sure = any(_certain(e) for e in events)
        found.append(Finding("initialize-dendrites", ERROR if sure else WARNING, events[0].line,
                             "UPA.initialize_dendrites is single-process only: under DDP the dendrites it adds "
                             "are frozen when wrapped and never synchronised between ranks",
                             "remove it; " + DEMO_FIX, events[0].path))
    return found


CHECKS = (check_legacy_modules, check_initialize_pai, check_demo_mode, check_initialize_dendrites)
