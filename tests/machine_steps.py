"""The machine's step as the tests of its decisions read it: the report of a generation's end, which is said and not
decided (every GenerationEnded gets one, first), is left out; tests/unit/test_machine.py tests that report itself."""

from __future__ import annotations

from pai_launch.core import machine
from pai_launch.core.actions import ReportGenerationEnd


def step(policy, state, event):
    state, actions = machine.step(policy, state, event)
    return state, [action for action in actions if not isinstance(action, ReportGenerationEnd)]
