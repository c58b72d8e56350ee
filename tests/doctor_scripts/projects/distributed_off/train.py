# A single-process PerforatedAI script built from torchvision's classification reference: it keeps the reference's
# DDP code but hard-codes args.distributed = False after parsing, so none of that code runs.
# Data for tests/unit/test_doctor_decided.py: read, never run.
import argparse
import glob
import os
import sys

import torch
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA


def get_args_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--perforate_model_parallel", action="store_true")
    parser.add_argument("--pai_load_folder", default=None)
    parser.add_argument("--save", default="PAI")
    parser.add_argument("--sync-bn", action="store_true")
    parser.add_argument("--gpu", default=0, type=int)
    return parser


def load_data(args):
    dataset = [(torch.randn(4, 8), torch.randint(0, 2, (4,)))]
    sampler = None
    if hasattr(args, "ra_sampler") and args.ra_sampler:
        sampler = torch.utils.data.RandomSampler(dataset)
    return dataset, sampler


def main(args):
    args.distributed = False

    GPA.pc.set_configuration_confirmed(True)
    GPA.pc.set_unwrapped_modules_confirmed(True)
    GPA.pc.set_weight_decay_accepted(True)
    model = UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)
    if args.pai_load_folder:
        newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), key=os.path.getmtime)
        model = UPA.load_system(model, args.pai_load_folder, os.path.basename(newest)[:-3], True)
    dataset, sampler = load_data(args)
    if args.distributed and args.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    GPA.pai_tracker.set_optimizer(torch.optim.SGD)
    optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})

    model_without_ddp = model
    if args.distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
        model_without_ddp = model.module

    while True:
        for x, y in dataset:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            if args.perforate_model_parallel:
                GPA.pai_tracker.save_tracker_settings()
                sys.exit(0)
            optimizer.step()
        model_without_ddp, restructured, complete = GPA.pai_tracker.add_validation_score(0.5, model_without_ddp)
        model = model_without_ddp
        if restructured and not complete:
            optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})
        if complete:
            with open(os.path.join(args.save, ".training_complete"), "w") as marker:
                marker.write("complete\n")
            return


if __name__ == "__main__":
    main(get_args_parser().parse_args())
