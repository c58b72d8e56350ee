# Correct, with pai_launch.training doing the protocol (a module alias and from-imports).
# Data for tests/unit/test_doctor.py: read, never run.
import argparse

import torch
from perforatedai import globals_perforatedai as GPA

import pai_launch.training as T
from pai_launch.training import add_validation_score, end_generation, in_turn

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--out", dest="save_dir", default="out/pai")
args = parser.parse_args()

run = T.start(args.perforate_model_parallel)
T.configure_without_prompts(max_dendrites=2)
model = T.perforate_model(run, torch.nn.Linear(4, 2), save_name=args.save_dir)
model = T.load_newest(run, model, args.pai_load_folder)
optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})
model = T.wrap_ddp(run, model)
while True:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(torch.ones(2, 4)), torch.zeros(2, 2)).backward()
    if run.init_run:
        T.init_run_done(run)
    optimizer.step()
    in_turn(run, lambda: print("epoch done"))
    net, restructured, complete = add_validation_score(run, 1.0, model)
    if complete:
        T.mark_complete(run, args.save_dir, "complete")
        end_generation(run)
    if restructured:
        end_generation(run)
