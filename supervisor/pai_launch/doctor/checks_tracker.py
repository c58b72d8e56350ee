"""A tracker the script builds itself (`PAINeuronModuleTracker(...)`, `tracker.initialize(model)`) where
UPA.perforate_model never runs. perforate_model is what stores the tracker in GPA.pai_tracker and names the save folder
(GPA.pc.set_save_name); the library reads both, never the tracker object the script holds (perforatedai 3.2.9):

- not stored in GPA.pai_tracker, that stays the empty list PerforatedAI starts with, and the tracker's initialize (or
  its first add_validation_score) raises AttributeError: 'list' object has no attribute ...;
- stored, but with no save name, the first add_validation_score saves best_model into the folder '' and raises
  FileNotFoundError: [Errno 2] No such file or directory: ''. GPA.pc.set_save_name(SAVE) before it avoids that.

Takes the walked Flow and returns Findings; no side effects.
"""

from __future__ import annotations

from pai_launch.doctor import api, names
from pai_launch.doctor.checks_setup import perforate_calls
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.model import ERROR, WARNING, Finding

UNSEEN = " (where doctor cannot read that the calls run, or run in that order)"


def _reached(events: list[Event]) -> bool:
    return any(e.surely_reached() for e in events)


def _not_stored(flow: Flow, first: Event) -> Finding:
    uses = flow.calls(lambda n: n == api.TRACKER + ".initialize" or names.is_tracker(n, "add_validation_score"))
    sure = first.surely_reached() and _reached(uses)
    return Finding("tracker-without-perforate-model", ERROR if sure else WARNING, first.line,
                   "the script builds PerforatedAI's tracker itself and never calls UPA.perforate_model, nor stores "
                   "the tracker in GPA.pai_tracker: that stays the empty list PerforatedAI starts with, and the "
                   "tracker's initialize (or its first add_validation_score) raises AttributeError: 'list' object "
                   "has no attribute ..." + ("" if sure else UNSEEN),
                   "model = UPA.perforate_model(model, save_name=SAVE), then use GPA.pai_tracker (perforate_model "
                   "builds the tracker, stores it and names the save folder)", first.path)


def _no_save_name(flow: Flow, first: Event) -> Finding | None:
    scores = flow.calls(lambda n: names.is_tracker(n, "add_validation_score"))
    if not scores:
        return None  # nothing saves: no crash doctor can point to
    named = [e for e in flow.calls(lambda n: names.is_pc_setter(n, "save_name")) if e.order < scores[0].order]
    if _reached(named):
        return None
    sure = not named and first.surely_reached() and _reached(scores)
    return Finding("tracker-without-perforate-model", ERROR if sure else WARNING, first.line,
                   "the script builds PerforatedAI's tracker itself and never calls UPA.perforate_model, which names "
                   "the save folder: GPA.pc's save name stays '', and the first add_validation_score (line "
                   f"{scores[0].line}) saves best_model into it and raises FileNotFoundError: [Errno 2] No such file "
                   "or directory: '' (in the process that saves: rank 0)" + ("" if sure else UNSEEN),
                   "model = UPA.perforate_model(model, save_name=SAVE) in place of building the tracker, or "
                   "GPA.pc.set_save_name(SAVE) before the first add_validation_score", first.path)


def check_tracker_without_perforate_model(flow: Flow) -> list[Finding]:
    built = flow.calls(api.is_tracker_built)
    if not built or perforate_calls(flow):
        return []
    first = built[0]
    if not any(e.kind == "assign" and e.name == api.TRACKER for e in flow.events):
        return [_not_stored(flow, first)]
    found = _no_save_name(flow, first)
    return [found] if found is not None else []


CHECKS = (check_tracker_without_perforate_model,)
