# A correct PerforatedAI DDP script whose training lives in a class that keeps the tracker as self.tracker, as many
# published trainers do: set-up in __init__, DDP wrapping in a method, scoring in another. doctor walks the methods
# where they are called. Data for tests/unit/test_doctor_tracker.py and test_doctor_classes.py: read, never run.
import argparse
import glob
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from perforatedai import utils_perforatedai as UPA
from perforatedai.utils_perforatedai import GPA


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--perforate_model_parallel", action="store_true")
    parser.add_argument("--pai_load_folder", default=None)
    parser.add_argument("--save", default="PAI")
    return parser.parse_args()


class Trainer:
    def __init__(self, args):
        self.args = args
        self.init_run = args.perforate_model_parallel
        self.distributed = not self.init_run and "WORLD_SIZE" in os.environ
        if self.distributed:
            dist.init_process_group("gloo")
        self.rank = dist.get_rank() if self.distributed else 0
        self.world = dist.get_world_size() if self.distributed else 1
        GPA.pc.set_configuration_confirmed(True)
        GPA.pc.set_unwrapped_modules_confirmed(True)
        GPA.pc.set_weight_decay_accepted(True)
        self.net = self.in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))
        if args.pai_load_folder:
            newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), key=os.path.getmtime)
            self.net = UPA.load_system(self.net, args.pai_load_folder, os.path.basename(newest)[:-3], True)
        self.tracker = GPA.pai_tracker
        self.tracker.set_optimizer(torch.optim.SGD)
        self.optimizer, _ = self.tracker.setup_optimizer(self.net, {"params": self.net.parameters(), "lr": 0.1}, {})
        self.model = self.net
        if not self.init_run:
            self.tracker.initialize_tracker_settings()

    def wrap(self):
        if self.distributed:
            self.model = nn.parallel.DistributedDataParallel(self.net, find_unused_parameters=True,
                                                             broadcast_buffers=False)

    def in_turn(self, fn):
        if not self.distributed:
            return fn()
        result = None
        for turn in range(self.world):
            if turn == self.rank:
                result = fn()
            dist.barrier()
        return result

    def leave(self):
        if self.distributed:
            dist.barrier()
            dist.destroy_process_group()
        sys.exit(0)

    def fit(self):
        self.wrap()
        while True:
            for x, y in [(torch.randn(4, 8), torch.randint(0, 2, (4,)))]:
                self.optimizer.zero_grad()
                nn.functional.cross_entropy(self.model(x), y).backward()
                if self.init_run:
                    self.tracker.save_tracker_settings()
                    sys.exit(0)
                self.optimizer.step()
            self.net, restructured, complete = self.in_turn(
                lambda: self.tracker.add_validation_score(0.5, self.net))
            if complete:
                if self.rank == 0:
                    with open(os.path.join(self.args.save, ".training_complete"), "w") as marker:
                        marker.write("complete\n")
                self.leave()
            if restructured:
                self.leave()


if __name__ == "__main__":
    Trainer(parse()).fit()
