"""A real perforatedai DDP script with the mistakes `pai-launch doctor --fix` edits away: the load folder's option
spelled with hyphens, no prompt-free confirmations, the capacity test turned off after perforate_model, DDP built
with its defaults, and the DDP wrapper scored. For tests/real/test_doctor_fix_real.py, which fixes a copy and runs
it to completion (as it is, the init run would stop at PerforatedAI's prompt). Self-contained, unlike the scripts
that share tiny_training.py's epoch: doctor reads the copy it fixes with no other file of tests/real beside it, and
must see the init run's end and the tracker's optimizer in it."""

import argparse
import warnings

import torch
import torch.nn.functional as F
from perforatedai import globals_perforatedai as GPA
from torch import nn

from pai_launch import training as pt

warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy")
parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai-load-folder", default=None)  # argparse does not read --pai_load_folder as this
args = parser.parse_args()
run = pt.start(args.perforate_model_parallel)

GPA.pc.set_silent(True)
GPA.pc.set_device(run.device)
GPA.pc.set_output_dimensions([-1, 0])
GPA.pc.set_max_dendrites(2)
GPA.pc.set_switch_mode(GPA.pc.DOING_SWITCH_EVERY_TIME)
torch.manual_seed(0)
# one rank at a time: each rewrites PAI/PAI_config.json
model = pt.perforate_model(run, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), save_name="PAI",
                           maximizing_score=False, making_graphs=False).to(run.device)
GPA.pc.set_testing_dendrite_capacity(False)
model = pt.load_newest(run, model, args.pai_load_folder)
GPA.pai_tracker.set_optimizer(torch.optim.SGD)
GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)
optimizer, _ = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.05}, {"step_size": 10})
if not run.init_run:
    GPA.pai_tracker.initialize_tracker_settings()
ddp = model
if run.distributed:
    ddp = nn.parallel.DistributedDataParallel(model)

data = torch.Generator().manual_seed(1)
x, y = torch.randn(64, 4, generator=data), torch.randint(0, 2, (64,), generator=data)
for _ in range(40):
    optimizer.zero_grad()
    if run.distributed:
        pt.zero_missing_grads(ddp)
    F.cross_entropy(ddp(x[run.rank::run.world]), y[run.rank::run.world]).backward()
    if run.init_run:
        pt.init_run_done(run)
    optimizer.step()
    with torch.no_grad():
        score = F.cross_entropy(model(x), y).item()
    model, restructured, complete = pt.in_turn(run, lambda: GPA.pai_tracker.add_validation_score(score, ddp))  # noqa: B023 - called at once
    if complete:
        pt.mark_complete(run, "PAI")
    if restructured or complete:
        pt.end_generation(run)
raise SystemExit("no dendrite was added in 40 epochs")
