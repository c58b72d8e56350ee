"""The training part the small real perforatedai scripts under tests/real share: PerforatedAI's optimizer and
tracker set up for a model, a fixed tiny data set, and one epoch's step with the validation score it gives."""

import argparse
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from perforatedai import globals_perforatedai as GPA

from pai_launch import training as pt


def protocol_args():
    """The two flags pai-launch passes (the init run's, a restart's); PerforatedAI's numpy warning silenced."""
    warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy")
    parser = argparse.ArgumentParser()
    parser.add_argument("--perforate_model_parallel", action="store_true")
    parser.add_argument("--pai_load_folder", default=None)
    return parser.parse_args()


def tiny_model(run, **settings):
    """A 4-8-2 MLP through perforate_model (one rank at a time), PerforatedAI configured without prompts and with
    `settings`; saved as PAI."""
    pt.configure_without_prompts(device=run.device, output_dimensions=[-1, 0], **settings)
    torch.manual_seed(0)
    return pt.perforate_model(run, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), save_name="PAI",
                              maximizing_score=False, making_graphs=False).to(run.device)


def tracked_optimizer(run, model):
    """The tracker's SGD and StepLR for `model`; the tracker's settings read back in a generation (not the init run)."""
    GPA.pai_tracker.set_optimizer(torch.optim.SGD)
    GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)
    optimizer, _ = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.05}, {"step_size": 10})
    if not run.init_run:
        GPA.pai_tracker.initialize_tracker_settings()
    return optimizer


def tiny_data():
    data = torch.Generator().manual_seed(1)
    return torch.randn(64, 4, generator=data), torch.randint(0, 2, (64,), generator=data)


def epoch(run, ddp, model, optimizer, x, y) -> float:
    """One step on this rank's shard (the init run ends after it); the validation loss on all of it."""
    optimizer.zero_grad()
    if run.distributed:
        pt.zero_missing_grads(ddp)
    F.cross_entropy(ddp(x[run.rank::run.world]), y[run.rank::run.world]).backward()
    if run.init_run:
        pt.init_run_done(run)
    optimizer.step()
    with torch.no_grad():
        return F.cross_entropy(model(x), y).item()
