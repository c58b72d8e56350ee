"""A real perforatedai DDP script that hands add_validation_score the DDP wrapper instead of its .module: PerforatedAI
prints "Need to call .module when using add validation score" to stdout and stops in pdb, which quits on the closed
stdin (bdb.BdbQuit), after a whole epoch of training. For tests/real/test_failure_causes_real.py."""

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
pt.configure_without_prompts(device=run.device, output_dimensions=[-1, 0], testing_dendrite_capacity=False,
                             max_dendrites=3, switch_mode=GPA.pc.DOING_SWITCH_EVERY_TIME)
torch.manual_seed(0)
model = pt.perforate_model(run, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), save_name="PAI",
                           maximizing_score=False, making_graphs=False).to(run.device)
model = pt.load_newest(run, model, args.pai_load_folder)
GPA.pai_tracker.set_optimizer(torch.optim.SGD)
GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)
optimizer, _ = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.05}, {"step_size": 10})
if not run.init_run:
    GPA.pai_tracker.initialize_tracker_settings()
ddp = pt.wrap_ddp(run, model)
data = torch.Generator().manual_seed(1)
x, y = torch.randn(64, 4, generator=data), torch.randint(0, 2, (64,), generator=data)
for epoch in range(3):
    optimizer.zero_grad()
    if run.distributed:
        pt.zero_missing_grads(ddp)
    F.cross_entropy(ddp(x[run.rank::run.world]), y[run.rank::run.world]).backward()
    if run.init_run:
        pt.init_run_done(run)
    optimizer.step()
    print(f"epoch {epoch} trained", flush=True)
    GPA.pai_tracker.add_validation_score(0.5, ddp)  # the mistake: the wrapper, not ddp.module
