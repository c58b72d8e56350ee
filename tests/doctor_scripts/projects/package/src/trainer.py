"""The training loop."""
import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA

from . import dist_setup
from .fit_loop import train_one_epoch
from .model import perforate_model


def run(args):
    if not args.pai_load_folder:
        shutil.rmtree(args.save, ignore_errors=True)
    for turn in range(dist_setup.WORLD):
        if turn == dist_setup.RANK:
            model = perforate_model(args.save)
        dist.barrier()
    if args.pai_load_folder:
        model = UPA.load_system(model, args.pai_load_folder, "latest", True)
    GPA.pai_tracker.set_optimizer(torch.optim.SGD)
    optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})
    if not args.perforate_model_parallel:
        GPA.pai_tracker.initialize_tracker_settings()
    model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, broadcast_buffers=False)
    model = model.module
    while True:
        train_one_epoch(model, optimizer)
        nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 2, (4,))).backward()
        if args.perforate_model_parallel:
            GPA.pai_tracker.save_tracker_settings()
            sys.exit(0)
        for turn in range(dist_setup.WORLD):
            if turn == dist_setup.RANK:
                model, restructured, training_complete = GPA.pai_tracker.add_validation_score(0.5, model)
            dist.barrier()
        if training_complete:
            if dist_setup.RANK == 0:
                open(os.path.join(args.save, ".training_complete"), "w").write("complete\n")
            dist.barrier()
            dist.destroy_process_group()
            break
        elif restructured and not training_complete:
            optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters()}, {})
