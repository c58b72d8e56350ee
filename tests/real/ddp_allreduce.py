"""A real torch DDP script (gloo on CPU) that follows the PerforatedAI launch protocol without the library.

Init run: writes SAVE/array_dims.csv. Generation 1: one DDP training step, all_reduce check, rank 0
saves SAVE/switch_2.pt. Generation 2: must get --pai_load_folder, loads the switch file, rank 0
writes SAVE/.training_complete. Each rank records what it saw in results/gen<G>-rank<R>.json.
"""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--save", default="PAI")
parser.add_argument("--spin", action="store_true", help="all_reduce forever (for signal tests)")
args = parser.parse_args()

if args.perforate_model_parallel:
    os.makedirs(args.save, exist_ok=True)
    with open(os.path.join(args.save, "array_dims.csv"), "w") as handle:
        handle.write(".fc,1,4\n")
    sys.exit(0)

generation = int(os.environ["PAI_LAUNCH_GENERATION"])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
if args.pai_load_folder:
    model.load_state_dict(torch.load(os.path.join(args.pai_load_folder, "switch_2.pt")))
ddp = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
loss = ddp(torch.full((2, 4), float(rank + 1))).sum()
loss.backward()
optimizer.step()
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
os.makedirs("results", exist_ok=True)
if args.spin:  # each rank's pid (a warm worker's command line and environment do not show its script or rank)
    with open(os.path.join("results", f"pid-rank{rank}"), "w") as handle:
        handle.write(str(os.getpid()))
if rank == 0 and args.spin:
    open(os.path.join("results", "spinning"), "w").close()
while args.spin:
    dist.all_reduce(torch.ones(1))
record = {"sum": total.item(), "world": world, "load": args.pai_load_folder, "run_id": os.environ["PAI_LAUNCH_RUN_ID"],
          "weight": ddp.module.weight.detach().tolist()}
with open(os.path.join("results", f"gen{generation}-rank{rank}.json"), "w") as handle:
    json.dump(record, handle)
dist.barrier()
if rank == 0:
    if generation == 1:
        torch.save(ddp.module.state_dict(), os.path.join(args.save, "switch_2.pt"))
    else:
        open(os.path.join(args.save, ".training_complete"), "w").write("complete")
dist.barrier()
dist.destroy_process_group()
