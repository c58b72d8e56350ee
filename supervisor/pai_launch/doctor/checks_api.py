"""Checks that the script calls PerforatedAI by names its 3.x releases have: older tutorials and forks use the 1.x
modules (`pb_globals`, `pb_utils`, ...) and `initialize_pai`, which fail at import or at the first call.

The names are those of the perforatedai release pai-launch is tested with; doctor never imports the package.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import names
from pai_launch.doctor.flow import Flow
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
    return f" ({count} more {what} in the project)" if count else ""


def check_legacy_modules(flow: Flow) -> list[Finding]:
    """One finding, at the first such import: one port fixes them all."""
    legacy = [(module, name, line) for module in flow.modules
              for name, line in _perforatedai_modules(module.tree) if name not in MODULES]
    if not legacy:
        return []
    module, name, line = legacy[0]
    return [Finding("perforatedai-legacy-api", ERROR, line,
                    f"perforatedai has no module {name} (a name from its 1.x releases): the import fails"
                    + _more(len(legacy) - 1, "such imports"),
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
                    + _more(len(calls) - 1, "calls"),
                    "call UPA.perforate_model(model) instead", first.path)]


CHECKS = (check_legacy_modules, check_initialize_pai)
