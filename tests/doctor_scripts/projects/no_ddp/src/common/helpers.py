"""PerforatedAI set-up (a namespace package: no __init__.py)."""
import sys

import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA


def perforate():
    GPA.pc.set_configuration_confirmed(True)
    GPA.pc.set_unwrapped_modules_confirmed(True)
    GPA.pc.set_weight_decay_accepted(True)
    return UPA.perforate_model(nn.Linear(8, 2))


def settings_then_exit():
    GPA.pai_tracker.save_tracker_settings()
    sys.exit(0)


def score(model):
    return GPA.pai_tracker.add_validation_score(0.5, model)
