# A PerforatedAI DDP project whose set-up lives in helper modules (utils/ddp_utils.py, utils/pai_utils.py).
# Data for tests/unit/test_doctor.py: read, never run. Its one problem: the DDP wrapper in utils/ddp_utils.py
# broadcasts buffers.
import argparse
import os

import torch
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA

import utils.pai_utils as pu
from utils.ddp_utils import finish, setup, wrap

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--save", default="PAI")
args = parser.parse_args()


def main():
    init_run = args.perforate_model_parallel
    GPA.pc.set_testing_dendrite_capacity(False)
    rank, world = setup(init_run)
    model = pu.perforate(nn.Linear(8, 2), args.save, rank, world)
    model = pu.resume(model, args.pai_load_folder)
    optimizer = pu.optimizer_for(model)
    ddp_model = wrap(model, init_run, world)
    while True:
        for x, y in [(torch.randn(4, 8), torch.randint(0, 2, (4,)))]:
            optimizer.zero_grad()
            nn.functional.cross_entropy(ddp_model(x), y).backward()
            if init_run:
                pu.save_settings_and_exit()
            optimizer.step()
        model, restructured, complete = pu.score(0.5, model, rank, world)
        if complete:
            if rank == 0:
                open(os.path.join(args.save, ".training_complete"), "w").write("complete\n")
        if complete or restructured:
            finish(world)


main()
