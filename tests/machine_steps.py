"""The machine's step as the tests of its decisions read it: the reports of the init run's and a generation's end,
which are said and not decided (every InitExited and GenerationEnded gets one, first), are left out;
tests/unit/test_machine.py tests those reports themselves."""

from __future__ import annotations

from pai_launch.core import machine
from pai_launch.core.actions import ReportGenerationEnd, ReportInitEnd


def step(policy, state, event):
    state, actions = machine.step(policy, state, event)
    return state, [action for action in actions if not isinstance(action, (ReportInitEnd, ReportGenerationEnd))]
