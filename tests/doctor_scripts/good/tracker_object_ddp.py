# A correct PerforatedAI DDP script that drives the tracker as an object, the way many published scripts do: GPA
# re-exported through utils_perforatedai, the tracker returned by a helper and kept as an attribute, and a baseline
# branch without PerforatedAI. Data for tests/unit/test_doctor.py: read, never run.
import argparse
import glob
import os
import sys
from types import SimpleNamespace

import perforatedai.globals_perforatedai as G
import torch
import torch.distributed as dist
import torch.nn as nn
from perforatedai import utils_perforatedai as UPA
from perforatedai.utils_perforatedai import GPA

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--save", default="PAI")
parser.add_argument("--doing_pai", type=int, default=1)
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


def make_tracker():
    tracker = GPA.pai_tracker
    tracker.set_optimizer(torch.optim.SGD)
    return tracker


def leave():
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    sys.exit(0)


G.pc.set_configuration_confirmed(True)
GPA.pc.set_unwrapped_modules_confirmed(True)
GPA.pc.set_weight_decay_accepted(True)
state = SimpleNamespace(tracker=None)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
if args.doing_pai:
    model = in_turn(lambda: UPA.perforate_model(model, save_name=args.save))
    if args.pai_load_folder:
        newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), key=os.path.getmtime)
        model = UPA.load_system(model, args.pai_load_folder, os.path.basename(newest)[:-3], True)
    state.tracker = make_tracker()
if state.tracker is not None:
    optimizer, scheduler = state.tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})
else:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if not init_run:
    if state.tracker is not None:
        state.tracker.initialize_tracker_settings()
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, broadcast_buffers=False)

for epoch in range(1000):
    for x, y in [(torch.randn(4, 8), torch.randint(0, 2, (4,)))]:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        if init_run:
            state.tracker.save_tracker_settings()
            sys.exit(0)
        optimizer.step()
    if state.tracker is None:
        continue
    net = model.module if distributed else model
    net, restructured, complete = in_turn(lambda: state.tracker.add_validation_score(0.5, net))
    if complete:
        if rank == 0:
            with open(os.path.join(args.save, ".training_complete"), "w") as marker:
                marker.write("complete\n")
        leave()
    if restructured:
        leave()
