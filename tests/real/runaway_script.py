"""A real perforatedai script that runs away, for tests/real/test_runaway.py: it leaves PerforatedAI's dendrite
capacity test on (the default) when perforate_model runs, which sets max_dendrites to 1000 and a switch every epoch,
then turns the test off, so the library never stops after its three test dendrites. Every generation adds a dendrite
and restarts; nothing ever writes the completion marker."""

import argparse
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from perforatedai import globals_perforatedai as GPA

from pai_launch import training as pt

warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy")
parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
args = parser.parse_args()

run = pt.start(args.perforate_model_parallel)
pt.configure_without_prompts(device=run.device, output_dimensions=[-1, 0], dont_give_up_unless_learning_rate_lowered=False,
                             find_best_lr=False)
torch.manual_seed(0)
model = pt.perforate_model(run, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), save_name="PAI",
                           maximizing_score=False, making_graphs=False).to(run.device)
GPA.pc.set_testing_dendrite_capacity(False)  # too late: perforate_model already took the test's settings
model = pt.load_newest(run, model, args.pai_load_folder)

GPA.pai_tracker.set_optimizer(torch.optim.SGD)
GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)
optimizer, _ = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.05}, {"step_size": 10})
if not run.init_run:
    GPA.pai_tracker.initialize_tracker_settings()
ddp = pt.wrap_ddp(run, model)
data = torch.Generator().manual_seed(1)
x, y = torch.randn(64, 4, generator=data), torch.randint(0, 2, (64,), generator=data)
for epoch in range(10):
    optimizer.zero_grad()
    if run.distributed:
        pt.zero_missing_grads(ddp)
    F.cross_entropy(ddp(x[run.rank::run.world]), y[run.rank::run.world]).backward()
    if run.init_run:
        pt.init_run_done(run)
    optimizer.step()
    with torch.no_grad():
        score = F.cross_entropy(model(x), y).item()
    model, restructured, complete = pt.add_validation_score(run, score, ddp)
    if complete:
        pt.mark_complete(run, "PAI")
    if restructured or complete:
        pt.end_generation(run)
raise SystemExit("no dendrite was added in 10 epochs")
