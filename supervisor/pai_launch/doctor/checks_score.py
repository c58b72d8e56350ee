"""A PerforatedAI script that never gives the tracker a validation score: add_validation_score is where the tracker
decides to add dendrites (restructure) and to end the run (training_complete), so without it no generation ever
ends in a switch or in completion and the run is plain training, whatever its epochs. Under pai-launch that is a
run that never writes its completion marker the protocol's way.

It looks for the name anywhere in the files read (walked or not, a helper or a method doctor cannot follow), so it
is reported only where no file holds a call that could score.
"""

from __future__ import annotations

import ast

from pai_launch.doctor import names
from pai_launch.doctor.checks_setup import perforate_calls
from pai_launch.doctor.flow import Flow
from pai_launch.doctor.model import ERROR, WARNING, Finding

SCORING = "add_validation_score"


def _scores_anywhere(flow: Flow) -> bool:
    """Whether any file read names add_validation_score on any receiver (GPA.pai_tracker, a tracker object, an
    attribute; called there or kept as a bound method to call later) or imports pai_launch.training's helper."""
    for module in flow.modules:
        if any(names.tail(path) == SCORING for path in module.imports.values()):
            return True
        if any(isinstance(node, ast.Attribute) and node.attr == SCORING for node in ast.walk(module.tree)):
            return True
    return False


def check_validation_score_missing(flow: Flow) -> list[Finding]:
    perforates = perforate_calls(flow)
    if not perforates or _scores_anywhere(flow):
        return []
    first = perforates[0]
    sure = first.surely_reached()
    return [Finding("validation-score-missing", ERROR if sure else WARNING, None,
                    "the model is perforated but nothing calls add_validation_score: the tracker never decides to "
                    "add dendrites or that training is complete, so no generation ends in a switch or in completion "
                    "and the run is plain training",
                    "after each validation: model, restructured, training_complete = "
                    "GPA.pai_tracker.add_validation_score(score, model) (the unwrapped model under DDP)")]


CHECKS = (check_validation_score_missing,)
