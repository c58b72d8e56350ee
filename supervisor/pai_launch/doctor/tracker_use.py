"""Whether a project uses PerforatedAI's tracker at all, and which of several plain optimizers is the one that runs:
what optimizer-not-from-tracker asks before it says the tracker has no optimizer.

A project that never reaches the 3.x tracker has no tracker optimizer to miss: one written for 1.x
(`PBG.pbTracker.setupOptimizer`, which doctor has no names for; perforatedai-legacy-api says to port it), one that
calls a tracker class perforatedai does not have (perforatedai-api-missing says so), or one with no tracker at all.
Pure: reads the walked Flow.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import api, names
from pai_launch.doctor.flow import Event, Flow


def _is_trackers(name: str | None) -> bool:
    """The tracker, one of its members, or a call that stores it in GPA.pai_tracker (perforate_model and 1.x's
    initialize_pai on the 3.x module; the tracker built by hand)."""
    name = api.canonical(name)
    return bool(name) and (name == api.TRACKER or name.startswith(api.TRACKER + ".") or names.is_perforate(name)
                           or name == api.TRACKER_CLASS or names.is_training(name, "perforate_model"))


def reaches_tracker(flow: Flow) -> bool:
    """Whether the project uses PerforatedAI's 3.x tracker: a call doctor read as the tracker's, or the tracker
    named anywhere in the files read (also in code the walk does not enter, such as a class's methods)."""
    if flow.calls(_is_trackers):
        return True
    for module in flow.modules:
        for node in ast.walk(module.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and _is_trackers(names.dotted(node, module.imports)):
                return True
    return False


def running(events: list[Event]) -> Event | None:
    """The first event doctor reads as sure to run where its function runs (the fallback after `if not available:
    ... return`), else the first: a plain optimizer in a branch whose test doctor cannot read (a baseline mode) is
    not the one to name while another one always runs."""
    return next((e for e in events if e.surely_reached()), events[0] if events else None)
