"""PerforatedAI's dendrite capacity test turned off only after perforate_model: by then perforate_model has set the
test's own settings (up to 1000 dendrites, a switch every epoch), and the run never ends.

Takes the walked Flow and returns Findings; no side effects.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import names
from pai_launch.doctor.checks_setup import perforate_calls
from pai_launch.doctor.env import candidates
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.model import ERROR, WARNING, Finding

CAPACITY = "testing_dendrite_capacity"


def _is_false(value: ast.AST, event: Event) -> bool:
    """Whether every value doctor reads for `value` is the constant False."""
    held = list(candidates(value, event.env))
    return bool(held) and all(isinstance(v, ast.Constant) and v.value is False for v, _scope in held)


def _capacity_test_off(event: Event) -> str | None:
    """How the event turns PerforatedAI's dendrite capacity test off, as written for the message; None when it does
    not (or passes a value doctor cannot read)."""
    if event.kind != "call":
        return None
    call = event.node
    if names.is_pc_setter(event.name, CAPACITY):
        value = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg is not None), None)
        return f"GPA.pc.set_{CAPACITY}(False)" if value is not None and _is_false(value, event) else None
    if names.is_training(event.name, "configure_without_prompts"):
        value = next((k.value for k in call.keywords if k.arg == CAPACITY), None)
        return f"configure_without_prompts({CAPACITY}=False)" if value is not None and _is_false(value, event) else None
    return None


def _exclusive(a: Event, b: Event) -> bool:
    """The two are in opposite branches of one if: no run makes both."""
    return any(g.node is h.node and g.positive != h.positive for g in a.guards for h in b.guards)


def check_capacity_test_late(flow: Flow) -> list[Finding]:
    """The capacity test turned off only after perforate_model: perforate_model has already set the test's maximum
    of 1000 dendrites and a switch every epoch, and with the test off nothing stops it after its three dendrites.
    An error where doctor reads the order on the path (both calls surely made), a warning where it cannot."""
    offs = [(e, how) for e in flow.events if (how := _capacity_test_off(e)) is not None]
    perforates = perforate_calls(flow)
    if not offs or not perforates or any(e.order < perforates[0].order for e, _how in offs):
        return []
    late, how = offs[0]
    before = [p for p in perforates if p.order < late.order and not _exclusive(p, late)]
    if not before:
        return []
    first = before[0]
    where = f"line {first.line}" if first.path == late.path else f"{first.path}:{first.line}"
    sure = late.surely_reached() and first.surely_reached()
    return [Finding("testing-dendrite-capacity-late", ERROR if sure else WARNING, late.line,
                    f"{how} comes after perforate_model ({where}): perforate_model already took the dendrite "
                    "capacity test's settings (up to 1000 dendrites, a switch every epoch), so with the test off "
                    "the run adds dendrites every epoch and never ends",
                    f"turn the test off before perforate_model: pai_launch.training.configure_without_prompts("
                    f"{CAPACITY}=False), or GPA.pc.set_{CAPACITY}(False) before UPA.perforate_model",
                    path=late.path)]


CHECKS = (check_capacity_test_late,)
