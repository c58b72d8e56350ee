"""A real perforatedai DDP script built on pai_launch.training, for tests/real/test_training_helpers_ddp.py.

Init run: one batch, then init_run_done. Generation 1: trains until PerforatedAI adds a dendrite (it
switches every epoch here), which writes PAI/switch_N.pt, and ends the generation. Generation 2: rank 0
first writes a torn PAI/switch_<N+2>.pt (the first half of the whole one, what a kill mid-write leaves)
and a PAI/switch_x.pt; then every rank calls load_newest, which must fall back to switch_N. Each rank
writes results/rank<R>.json (what it loaded, compared with switch_N.pt's tensors); rank 0 marks the run
complete.
"""

import argparse
import json
import os
import shutil
import warnings
from pathlib import Path

import torch
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from safetensors.torch import load_file

from pai_launch import training as pt
from tests.real.tiny_training import epoch, tiny_data, tracked_optimizer

warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy")
parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
args = parser.parse_args()

run = pt.start(args.perforate_model_parallel)
pt.configure_without_prompts(device=run.device, output_dimensions=[-1, 0], testing_dendrite_capacity=False,
                             max_dendrites=3, switch_mode=GPA.pc.DOING_SWITCH_EVERY_TIME,
                             dont_give_up_unless_learning_rate_lowered=False, find_best_lr=False)
torch.manual_seed(0)
model = pt.perforate_model(run, nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), save_name="PAI",
                           maximizing_score=False, making_graphs=False).to(run.device)

real = None
if args.pai_load_folder is not None:
    real = pt.newest_switch(args.pai_load_folder)
    if run.rank == 0:
        whole = Path(f"PAI/{real}.pt").read_bytes()
        with open(f"PAI/switch_{int(real[len('switch_'):]) + 2}.pt", "wb") as handle:
            handle.write(whole[: len(whole) // 2])
        shutil.copy(f"PAI/{real}.pt", "PAI/switch_x.pt")
    pt.in_turn(run, lambda: None)  # the torn file is there before any rank looks
model = pt.load_newest(run, model, args.pai_load_folder)

optimizer = tracked_optimizer(run, model)

if real is not None:
    saved = load_file(f"PAI/{real}.pt")
    state = {name: value.cpu() for name, value in model.state_dict().items()}
    os.makedirs("results", exist_ok=True)
    with open(f"results/rank{run.rank}.json", "w") as handle:
        json.dump({"world": run.world, "real": real, "newest": pt.newest_switch("PAI"),
                   "tensors": sorted(saved), "restored": sorted(name for name, value in saved.items()
                                                                if name in state and torch.equal(state[name], value))},
                  handle)
    pt.mark_complete(run, "PAI")
    pt.end_generation(run)

ddp = pt.wrap_ddp(run, model)
x, y = tiny_data()
for _ in range(10):
    model, restructured, complete = pt.add_validation_score(run, epoch(run, ddp, model, optimizer, x, y), ddp)
    if restructured or complete:
        pt.end_generation(run)
raise SystemExit("no dendrite was added in 10 epochs")
