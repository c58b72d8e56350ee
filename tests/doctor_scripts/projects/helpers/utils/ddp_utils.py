"""Process group set-up and the DDP wrapper for train.py."""
import os
import sys

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(init_run):
    if init_run or "RANK" not in os.environ:
        return 0, 1
    dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size()


def wrap(model, init_run, world):
    if init_run or world == 1:
        return model
    return DDP(model, find_unused_parameters=True)


def finish(world):
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    sys.exit(0)
