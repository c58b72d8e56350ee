"""PerforatedAI set-up for train.py: prompts off, perforate one rank at a time, resume, the tracker's optimizer."""
import glob
import os
import sys

import torch
import torch.distributed as dist
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA


def one_at_a_time(fn, rank, world):
    """fn() on each rank in turn, rank 0 first."""
    if world > 1:
        mine = None
        for turn in range(world):
            if rank == turn:
                mine = fn()
            dist.barrier()
        return mine
    return fn()


def perforate(net, save, rank, world):
    GPA.pc.set_configuration_confirmed(True)
    GPA.pc.set_unwrapped_modules_confirmed(True)
    GPA.pc.set_weight_decay_accepted(True)
    return one_at_a_time(lambda: UPA.perforate_model(net, save_name=save), rank, world)


def resume(model, folder):
    if not folder:
        return model
    newest = max(glob.glob(os.path.join(folder, "switch_*.pt")), key=os.path.getmtime)
    return UPA.load_system(model, folder, os.path.basename(newest)[:-3], True)


def optimizer_for(model):
    GPA.pai_tracker.set_optimizer(torch.optim.SGD)
    optimizer, _scheduler = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})
    GPA.pai_tracker.initialize_tracker_settings()
    return optimizer


def save_settings_and_exit():
    GPA.pai_tracker.save_tracker_settings()
    sys.exit(0)


def score(value, model, rank, world):
    return one_at_a_time(lambda: GPA.pai_tracker.add_validation_score(value, model), rank, world)
