"""One rank of a 2-process gloo group calling pai_launch.in_process.rewrap on models that differ between ranks
(started by tests/real/test_in_process.py). CASE (argv[1]): "shape" gives rank 1 a wider layer; "values" gives rank 1
other weights and wraps without DDP (whose constructor would broadcast rank 0's), so the value check has to see it;
"same" gives both the same model. Rank 0 prints "rewrapped" and the wrapper's type when the call returns. At exit each
rank writes the names of its threads still running to threads-RANK.json: gloo's, left to the interpreter's teardown,
can abort it."""

import atexit
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

from pai_launch import in_process
from pai_launch import training as pt

case = sys.argv[1]
run = pt.start(False, backend="gloo")


def _record_threads():
    names = [open(f"/proc/self/task/{tid}/comm").read().strip() for tid in os.listdir("/proc/self/task")]
    with open(f"threads-{run.rank}.json", "w") as out:
        json.dump(names, out)


atexit.register(_record_threads)
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8 if case == "shape" and run.rank == 1 else 4),
                    nn.Linear(8 if case == "shape" and run.rank == 1 else 4, 2))
if case == "values" and run.rank == 1:
    with torch.no_grad():
        net[1].weight.add_(0.5)
old = pt.wrap_ddp(run, nn.Linear(4, 2))
optimizer = torch.optim.SGD(old.parameters(), lr=0.1)
wrap = (lambda run, model: model) if case == "values" else pt.wrap_ddp
model, built = in_process.rewrap(run, net, old, optimizer, lambda n: torch.optim.SGD(n.parameters(), lr=0.1), wrap)
assert not optimizer.param_groups and not optimizer.state  # the old optimizer's state is gone
assert not hasattr(old, "reducer")  # and the old wrapper's reducer
if run.rank == 0:
    print(f"rewrapped {type(model).__name__} {type(built).__name__}", flush=True)
dist.barrier()  # both ranks done before either tears its group down: a peer gone mid-teardown aborts gloo (-6)
dist.destroy_process_group()
