"""The model and its PerforatedAI conversion."""
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA


def perforate_model(save):
    GPA.pc.set_configuration_confirmed(True)
    GPA.pc.set_unwrapped_modules_confirmed(True)
    GPA.pc.set_weight_decay_accepted(True)
    return UPA.perforate_model(nn.Linear(8, 2), save_name=save)
