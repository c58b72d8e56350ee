# Correct, written with import aliases, positional arguments and helper functions.
# Data for tests/unit/test_doctor.py: read, never run.
import os
import sys

import perforatedai.utils_perforatedai as U
import torch
import torch.distributed as D
from perforatedai import globals_perforatedai as G
from perforatedai.utils_perforatedai import perforate_model
from torch.nn.parallel import DistributedDataParallel as DDP

DDP_FLAGS = {"find_unused_parameters": True, "broadcast_buffers": False}


def options():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--perforate_model_parallel", action="store_true")
    p.add_argument("--pai_load_folder")
    return p.parse_args()


def quiet():
    for setter in (G.pc.set_configuration_confirmed, G.pc.set_unwrapped_modules_confirmed):
        setter(True)
    G.pc.set_weight_decay_accepted(True)
    G.pc.set_configuration_confirmed(True)


def one_at_a_time(ddp, rank, world, job):
    out = None
    for who in range(world if ddp else 1):
        if who == rank:
            out = job()
        if ddp:
            D.barrier()
    return out


def leave(ddp):
    if ddp:
        D.barrier()
        D.destroy_process_group()
    sys.exit(0)


def main():
    opts = options()
    ddp = "WORLD_SIZE" in os.environ and not opts.perforate_model_parallel
    if ddp:
        D.init_process_group("gloo")
    rank, world = (D.get_rank(), D.get_world_size()) if ddp else (0, 1)
    quiet()
    net = one_at_a_time(ddp, rank, world, lambda: perforate_model(torch.nn.Linear(4, 2), True, "runs/alias"))
    if opts.pai_load_folder:
        net = U.load_system(net, opts.pai_load_folder, "switch_%d" % 2, True)
    opt, _ = G.pai_tracker.setup_optimizer(net, dict(params=net.parameters(), lr=0.1), {})
    if opts.perforate_model_parallel:
        torch.nn.functional.mse_loss(net(torch.ones(1, 4)), torch.zeros(1, 2)).backward()
        G.pai_tracker.save_tracker_settings()
        return
    G.pai_tracker.initialize_tracker_settings()
    wrapped = DDP(net, **DDP_FLAGS) if ddp else net
    bare = wrapped.module if ddp else wrapped
    for _epoch in range(100):
        opt.step()
        bare, changed, done = one_at_a_time(ddp, rank, world, lambda: G.pai_tracker.add_validation_score(1.0, bare))
        if done and rank == 0:
            open(os.path.join("runs/alias", ".training_complete"), "w").close()
        if done or changed:
            leave(ddp)


if __name__ == "__main__":
    main()
