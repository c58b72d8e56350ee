# A DDP script that builds PerforatedAI's tracker itself, as older published scripts do, and never calls
# UPA.perforate_model: GPA.pc's save name stays '' and the first add_validation_score raises FileNotFoundError.
# Everything else follows the protocol. Data for tests/unit/test_doctor_tracker.py: read, never run.
import argparse
import glob
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA
from perforatedai.tracker_perforatedai import PAINeuronModuleTracker

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--save", default="PAI")
args = parser.parse_args()
init_run = args.perforate_model_parallel
distributed = not init_run and "WORLD_SIZE" in os.environ
if distributed:
    dist.init_process_group("gloo")
rank = dist.get_rank() if distributed else 0
world = dist.get_world_size() if distributed else 1


def in_turn(fn):
    if not distributed:
        return fn()
    result = None
    for turn in range(world):
        if turn == rank:
            result = fn()
        dist.barrier()
    return result


GPA.pc.set_configuration_confirmed(True)
GPA.pc.set_unwrapped_modules_confirmed(True)
GPA.pc.set_weight_decay_accepted(True)
GPA.pai_tracker = PAINeuronModuleTracker(doing_pai=True, save_name=args.save)
tracker = GPA.pai_tracker
model = tracker.initialize(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), doing_pai=True,
                           save_name=args.save)
if args.pai_load_folder:
    newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), key=os.path.getmtime)
    model = UPA.load_system(model, args.pai_load_folder, os.path.basename(newest)[:-3], True)
tracker.set_optimizer(torch.optim.SGD)
optimizer, scheduler = tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})
if not init_run:
    tracker.initialize_tracker_settings()
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, broadcast_buffers=False)

while True:
    for x, y in [(torch.randn(4, 8), torch.randint(0, 2, (4,)))]:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        if init_run:
            tracker.save_tracker_settings()
            sys.exit(0)
        optimizer.step()
    net = model.module if distributed else model
    net, restructured, complete = in_turn(lambda: tracker.add_validation_score(0.5, net))
    if complete:
        if rank == 0:
            with open(os.path.join(args.save, ".training_complete"), "w") as marker:
                marker.write("complete\n")
    if complete or restructured:
        if distributed:
            dist.barrier()
            dist.destroy_process_group()
        sys.exit(0)
