"""A DDP script whose model keeps a buffer of another size on rank 1, as PerforatedAI's tracker buffers come to be,
with DistributedDataParallel's default broadcast_buffers=True: gloo aborts rank 1 in the first forward. For
tests/real/test_failure_causes_real.py. Its init run only writes PAI/array_dims.csv, as PerforatedAI's would."""

import argparse
import os
import sys

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
args = parser.parse_args()
if args.perforate_model_parallel:
    os.makedirs("PAI", exist_ok=True)
    with open("PAI/array_dims.csv", "w") as handle:
        handle.write(".fc,1,4\n")
    sys.exit(0)

dist.init_process_group("gloo")
rank = dist.get_rank()


class Tracked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.register_buffer("tracker", torch.zeros(2000, dtype=torch.uint8))

    def forward(self, x):
        return self.fc(x)


model = Tracked()
ddp = torch.nn.parallel.DistributedDataParallel(model)
if rank == 1:  # a dendrite added on one rank only: its tracker buffer is one byte shorter
    model.tracker.data = torch.zeros(1999, dtype=torch.uint8)
for step in range(3):
    ddp(torch.randn(2, 4)).sum().backward()
