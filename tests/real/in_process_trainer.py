"""A tiny real PerforatedAI DDP script for --restructure in-process: many dendrites, a restructure every epoch.

After each restructure (training.after_restructure) every rank all-gathers its whole flattened parameter vector and
rank 0 appends one JSON line to RESULTS: whether every rank's parameters are bit-identical to rank 0's, the
parameter count, this process's RSS and open file descriptors, the pids (the same processes all along). With
--crash-after N rank 1 exits 1 after its Nth in-process restructure in the first generation only (a retry resumes
from the newest switch file and must finish). Each process prints which switch file it loaded.
"""

import argparse
import json
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from perforatedai import globals_perforatedai as GPA

from pai_launch import training as pt

warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--perforate_model_parallel", action="store_true")
    p.add_argument("--pai_load_folder", default=None)
    p.add_argument("--max-dendrites", type=int, default=22)
    p.add_argument("--epochs-max", type=int, default=200)
    p.add_argument("--crash-after", type=int, default=0)
    p.add_argument("--results", required=True)
    return p.parse_args()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def own_usage():
    with open("/proc/self/statm") as statm:
        rss_pages = int(statm.read().split()[1])
    return rss_pages * os.sysconf("SC_PAGE_SIZE"), len(os.listdir("/proc/self/fd"))


def identical_everywhere(run, net):
    flat = torch.cat([p.detach().reshape(-1).to(torch.float64) for p in net.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(run.world)]
    torch.distributed.all_gather(gathered, flat)
    return all(torch.equal(g, gathered[0]) for g in gathered), flat.numel()


def main():
    args = parse_args()
    run = pt.start(args.perforate_model_parallel)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 8, generator=g)
    y = (x[:, 0] > 0).long()
    x, y = x[run.rank::run.world], y[run.rank::run.world]
    pt.configure_without_prompts(
        device=run.device, output_dimensions=[-1, 0], testing_dendrite_capacity=False,
        max_dendrites=args.max_dendrites, switch_mode=GPA.pc.DOING_FIXED_SWITCH, fixed_switch_num=1,
        first_fixed_switch_num=1, dont_give_up_unless_learning_rate_lowered=False, find_best_lr=False)
    model = pt.perforate_model(run, Net(), save_name="PAI", maximizing_score=False, making_graphs=False)
    model = pt.load_newest(run, model, args.pai_load_folder)
    GPA.pai_tracker.set_optimizer(torch.optim.SGD)
    GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)

    def build_optimizer(net):
        return GPA.pai_tracker.setup_optimizer(net, {"params": net.parameters(), "lr": 0.05},
                                               {"step_size": 1000, "gamma": 0.5})

    optimizer, _scheduler = build_optimizer(model)
    if not run.init_run:
        GPA.pai_tracker.initialize_tracker_settings()
    model = pt.wrap_ddp(run, model)
    restructures = 0
    first_generation = os.environ.get("PAI_LAUNCH_GENERATION") == "1"
    for epoch in range(args.epochs_max):
        optimizer.zero_grad()
        if run.distributed:
            pt.zero_missing_grads(model)
        F.cross_entropy(model(x), y).backward()
        if run.init_run:
            pt.init_run_done(run)
        optimizer.step()
        with torch.no_grad():
            score = F.cross_entropy(model.module(x), y).item() + 1.0 / (epoch + 1)  # keeps improving: dendrites kept
        net, restructured, complete = pt.add_validation_score(run, score, model)
        if complete:
            pt.mark_complete(run, "PAI")
            pt.end_generation(run)
        if restructured:
            model, (optimizer, _scheduler) = pt.after_restructure(run, net, model, optimizer, build_optimizer)
            restructures += 1
            same, count = identical_everywhere(run, net)
            rss, fds = own_usage()
            if run.rank == 0:
                with open(args.results, "a") as out:
                    out.write(json.dumps({"restructure": restructures, "identical": same, "parameters": count,
                                          "rss": rss, "fds": fds, "pid": os.getpid(),
                                          "generation": os.environ.get("PAI_LAUNCH_GENERATION")}) + "\n")
            if first_generation and run.rank == 1 and restructures == args.crash_after:
                print(f"rank 1 crashes after in-process restructure {restructures}", flush=True)
                sys.exit(1)
    pt.mark_complete(run, "PAI", "epochs_max")
    pt.end_generation(run)


if __name__ == "__main__":
    main()
