"""PerforatedAI training under torch DDP (or DataParallel): the pai-launch demo.

A tiny MLP learns to classify random Gaussian clusters generated in-process from
--seed, while PerforatedAI (PAI) adds dendrites to its Linear layers.  It follows
the PerforatedAI distributed recipe and is meant to be read as the model for
adapting your own script.

Three ways to run it:

1. Init run (once, single process, no process group):
       python train_pai_ddp.py --perforate_model_parallel
   Runs one batch, saves PAI's tracker settings (SAVE/array_dims.csv), exits 0.

2. DDP generation, started by torchrun (WORLD_SIZE/RANK/LOCAL_RANK set):
       torchrun --nproc_per_node=2 train_pai_ddp.py [--pai_load_folder SAVE]
   Trains until PAI restructures the model (adds dendrites), then every rank
   exits 0 and a launcher starts the next generation with --pai_load_folder,
   which resumes from the newest SAVE/switch_N.pt.  When PAI reports the
   training complete, rank 0 writes SAVE/.training_complete and all exit 0.
   (scripts/reference/train_distributed.sh is the recipe's bash loop for this.)

3. DataParallel: after the init run, plain `python train_pai_ddp.py`.
   Restructures happen in-process; it runs to completion in one process.

Two races in the recipe as published are fixed here:
  * every rank's UPA.perforate_model rewrites SAVE/<save>_config.json while the
    others read it (intermittent JSONDecodeError): ranks take turns, with a
    barrier after each turn;
  * PAI keeps its tracker state in a uint8 buffer whose length differs per rank,
    and DDP's default broadcast_buffers=True makes gloo/nccl abort with a size
    mismatch: DDP is built with broadcast_buffers=False.

Progress lines for benchmarks go to stdout as
    PAI_EXAMPLE {"event": ..., "t": ..., "rank": ..., "pid": ..., "gen": ...}
"""
import json
import os
import time


def emit(event, **fields):
    """Print one machine-readable progress line (see module docstring)."""
    record = {
        "event": event,
        "t": time.time(),
        "rank": int(os.environ.get("RANK") or 0),
        "pid": os.getpid(),
        "gen": os.environ.get("PAI_LAUNCH_GENERATION", ""),
    }
    record.update(fields)
    say("PAI_EXAMPLE " + json.dumps(record))


def say(line):
    """Print a line with ONE write (ranks share stdout, which may be unbuffered)."""
    print(line + "\n", end="", flush=True)


emit("process_start")  # before the slow imports: marks when the process came to exist

import argparse  # noqa: E402
import glob  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from perforatedai import globals_perforatedai as GPA  # noqa: E402
from perforatedai import utils_perforatedai as UPA  # noqa: E402

# Harmless noise: numpy 2 vs a tensor conversion inside PAI, and torch's advice to
# move to forward_sync_buffers, which (unlike broadcast_buffers=False, needed
# here) still syncs buffers when DDP is built.
warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy")
warnings.filterwarnings("ignore", message="`broadcast_buffers` is deprecated")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--perforate_model_parallel", action="store_true",
                   help="init run: one batch on one process, save PAI tracker settings, exit")
    p.add_argument("--pai_load_folder", default=None,
                   help="DDP resume: load the newest switch_N.pt from this folder")
    p.add_argument("--pai-save-name", dest="pai_save_name", default="PAI",
                   help="PAI save folder, relative to the working directory (default: PAI)")
    p.add_argument("--seed", type=int, default=0, help="seed for data and weights")
    p.add_argument("--epochs-max", dest="epochs_max", type=int, default=30,
                   help="safety cap on epochs per process (default: 30)")
    p.add_argument("--switch-epochs", dest="switch_epochs", type=int, default=2,
                   help="epochs between dendrite additions (default: 2)")
    p.add_argument("--max-dendrites", dest="max_dendrites", type=int, default=2,
                   help="dendrites to add before training is complete (default: 2)")
    p.add_argument("--no-graphs", dest="graphs", action="store_false",
                   help="skip PAI's per-epoch PNG/CSV graphs (faster epochs)")
    return p.parse_args()


class MLP(nn.Module):
    """Tiny classifier; PAI perforates (adds dendrites to) its Linear layers."""

    def __init__(self, n_in=16, hidden=16, n_classes=4):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def make_data(seed, n_train=4096, n_val=1024, n_in=16, n_classes=4, per_class=3):
    """Gaussian clusters, several per class; identical on every rank for a seed."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(n_classes * per_class, n_in, generator=g)

    def sample(n):
        cluster = torch.randint(0, n_classes * per_class, (n,), generator=g)
        return centers[cluster] + torch.randn(n, n_in, generator=g), cluster % n_classes

    return sample(n_train), sample(n_val)


def configure_pai(args, device):
    """PAI settings: no prompts (no TUI, no pdb), and quick dendrite growth."""
    GPA.pc.set_device(device)
    GPA.pc.set_output_dimensions([-1, 0])       # Linear outputs are [batch, features]
    GPA.pc.set_configuration_confirmed(True)    # else perforate_model opens a TUI
    GPA.pc.set_unwrapped_modules_confirmed(True)  # else pdb.set_trace()
    GPA.pc.set_weight_decay_accepted(True)        # else pdb.set_trace()
    GPA.pc.set_testing_dendrite_capacity(False)   # a real run, not the capacity test
    GPA.pc.set_max_dendrites(args.max_dendrites)
    GPA.pc.set_switch_mode(GPA.pc.DOING_FIXED_SWITCH)  # add dendrites every N epochs
    GPA.pc.set_fixed_switch_num(args.switch_epochs)
    GPA.pc.set_first_fixed_switch_num(args.switch_epochs)
    # Without these two, an LR search after the 2nd dendrite stalls switching.
    GPA.pc.set_dont_give_up_unless_learning_rate_lowered(False)
    GPA.pc.set_find_best_lr(False)
    GPA.pc.set_silent(True)  # keep PAI's per-epoch chatter out of the log


def batches(x, y, batch_size, gen):
    perm = torch.randperm(len(x), generator=gen)
    for i in range(0, len(x), batch_size):
        idx = perm[i:i + batch_size]
        yield x[idx], y[idx]


@torch.no_grad()
def evaluate(net, x, y, device):
    """Whole validation set, no DDP involved: every rank gets the same score."""
    net.eval()
    logits = net(x.to(device))
    net.train()
    return F.cross_entropy(logits, y.to(device)).item()


def finish(event, distributed, code=0):
    if distributed:
        dist.barrier()                # all ranks are done with PAI's files
        dist.destroy_process_group()
    emit(event)
    sys.exit(code)


def main():
    args = parse_args()
    init_run = args.perforate_model_parallel
    distributed = not init_run and "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK") or 0)
    world = int(os.environ.get("WORLD_SIZE") or 1)
    log = say if rank == 0 else (lambda line: None)

    if distributed:
        if torch.cuda.is_available():
            local_rank = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local_rank)
            device = torch.device("cuda", local_rank)
            dist.init_process_group("nccl")
        else:
            device = torch.device("cpu")
            dist.init_process_group("gloo")
    else:
        world = 1
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    torch.manual_seed(args.seed)
    (train_x, train_y), (val_x, val_y) = make_data(args.seed)
    # DDP: each rank trains on its own shard of the training set.
    train_x, train_y = train_x[rank::world], train_y[rank::world]

    # --- PAI: settings, then perforate_model (adds the dendrite machinery) ---
    configure_pai(args, device)
    model = MLP()
    if distributed:
        # Race fix 1: one rank at a time, since each rewrites <save>_config.json.
        for turn in range(world):
            if turn == rank:
                model = UPA.perforate_model(model, save_name=args.pai_save_name,
                                            maximizing_score=False,
                                            making_graphs=args.graphs)
            dist.barrier()
    else:
        model = UPA.perforate_model(model, save_name=args.pai_save_name,
                                    maximizing_score=False, making_graphs=args.graphs)
    model = model.to(device)

    # --- PAI (DDP): resume from the newest switch_N.pt, before the optimizer ---
    if args.pai_load_folder is not None:
        numbers = []
        for f in glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")):
            try:
                numbers.append(int(os.path.basename(f)[len("switch_"):-len(".pt")]))
            except ValueError:
                pass
        if numbers:
            model = UPA.load_system(model, args.pai_load_folder, f"switch_{max(numbers)}", True)
            model = model.to(device)
            log(f"Loaded PAI state from {args.pai_load_folder}/switch_{max(numbers)}.pt")
        else:
            log(f"No switch_N.pt in {args.pai_load_folder}: starting from the beginning")

    # --- PAI: the optimizer and scheduler are built through the tracker ---
    # (PAI steps the scheduler itself inside add_validation_score.)
    GPA.pai_tracker.set_optimizer(torch.optim.Adam)
    GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)
    sched_args = {"step_size": 50, "gamma": 0.5}

    def build_optimizer(net):
        return GPA.pai_tracker.setup_optimizer(net, {"params": net.parameters(), "lr": 0.003},
                                               sched_args)

    optimizer, scheduler = build_optimizer(model)

    # --- PAI: multi-process wrappers need the settings saved by the init run ---
    if not init_run:
        GPA.pai_tracker.initialize_tracker_settings()
        if distributed:
            # Race fix 2: broadcast_buffers=False (PAI's per-rank buffers differ in size).
            model = nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None,
                find_unused_parameters=True, broadcast_buffers=False)
        else:
            model = nn.DataParallel(model)

    save = args.pai_save_name
    first_step = True
    shuffle = torch.Generator().manual_seed(args.seed + 1000 * rank)
    for epoch in range(args.epochs_max):
        for xb, yb in batches(train_x, train_y, 128, shuffle):
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            if distributed:
                # Parameters PAI leaves out of the graph still need a gradient
                # for DDP's allreduce: start them all at zero.
                for p in model.parameters():
                    if p.requires_grad and p.grad is None:
                        p.grad = torch.zeros_like(p)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            if init_run:
                # --- PAI: init run saves the tracker settings after one batch ---
                GPA.pai_tracker.save_tracker_settings()
                say(f"PAI settings saved to {save}/; now train without --perforate_model_parallel")
                emit("init_exit")
                sys.exit(0)
            optimizer.step()
            if first_step:
                emit("first_step")
                first_step = False

        net = model.module if not init_run else model
        score = evaluate(net, val_x, val_y, device)  # validation loss, lower is better
        emit("epoch", epoch=epoch, score=score)
        log(f"epoch {epoch}: val loss {score:.4f}")

        # --- PAI: every rank adds the same score (keeps the trackers in step) ---
        net, restructured, complete = GPA.pai_tracker.add_validation_score(score, net)
        net = net.to(device)
        if complete:  # check before restructured: both can be True at the end
            log("PAI training complete")
            if rank == 0:
                os.makedirs(save, exist_ok=True)
                with open(os.path.join(save, ".training_complete"), "w") as f:
                    f.write("complete\n")
            finish("complete_exit", distributed)
        if restructured:
            if distributed:
                log("PAI added dendrites: exiting so the launcher restarts the next generation")
                finish("restructure_exit", distributed)
            # DataParallel: rewrap the new model and rebuild optimizer/scheduler.
            log("PAI added dendrites: continuing in-process")
            model = nn.DataParallel(net)
            optimizer, scheduler = build_optimizer(net)

    log(f"reached --epochs-max {args.epochs_max}: stopping here")
    if rank == 0:
        os.makedirs(save, exist_ok=True)
        with open(os.path.join(save, ".training_complete"), "w") as f:
            f.write("epochs_max\n")
    finish("complete_exit", distributed)


if __name__ == "__main__":
    main()
