"""PerforatedAI training under torch DDP (or DataParallel): the pai-launch demo.

A tiny MLP learns to classify Gaussian clusters generated in-process from
--seed, while PerforatedAI (PAI) adds dendrites to its Linear layers.  It follows
the PerforatedAI distributed recipe and is meant to be read as the model for
adapting your own script: the PAI-specific parts are marked "PAI:".

Three ways to run it:

1. Init run (once, one process, no process group):
       python train_pai_ddp.py --perforate_model_parallel
   Runs one batch, saves PAI's tracker settings (SAVE/array_dims.csv), exits 0.

2. A DDP generation, started by torchrun (which sets WORLD_SIZE/RANK/LOCAL_RANK):
       torchrun --nproc_per_node=2 train_pai_ddp.py [--pai_load_folder SAVE]
   Trains until PAI restructures the model (adds dendrites); then every rank
   exits 0 and a launcher starts the next generation with --pai_load_folder
   SAVE, which resumes from the newest SAVE/switch_N.pt.  When PAI says training
   is complete, rank 0 writes SAVE/.training_complete and every rank exits 0.
   (scripts/reference/train_distributed.sh is the recipe's bash loop for this.)

3. DataParallel: after the init run, a plain `python train_pai_ddp.py`.
   Restructures happen in-process; one process runs to completion.

SAVE is --pai-save-name (default PAI), relative to the working directory.

Races in the recipe as published, fixed here:
  * Every rank's UPA.perforate_model rewrites SAVE/<save>_config.json while the
    others read it (intermittent JSONDecodeError at start-up).  Fix: the ranks
    call it in turn, with a barrier after each turn.
  * PAI keeps tracker state in a uint8 buffer whose length differs per rank;
    DDP's default broadcast_buffers=True then aborts gloo/nccl with a size
    mismatch mid-training.  Fix: DDP(..., broadcast_buffers=False).
  * (Same cause as the first) at a dendrite switch every rank reads
    SAVE/best_model.pt inside add_validation_score, which rank 0 may be
    rewriting in that same call.  Fix: add_validation_score in turn too,
    rank 0 first.

For benchmarks, progress lines go to stdout, one JSON object each:
    PAI_EXAMPLE {"event": ..., "t": ..., "rank": ..., "pid": ..., "gen": ...}
events: process_start, first_step, epoch (+ "epoch", "score"), and the last one
of the process: init_exit, restructure_exit or complete_exit.
"""
import json
import os
import time


def say(line):
    """Print a line in ONE write: the ranks share stdout, which may be unbuffered."""
    print(line + "\n", end="", flush=True)


def emit(event, **fields):
    """Print one machine-readable progress line (see the module docstring)."""
    record = {
        "event": event,
        "t": time.time(),
        "rank": int(os.environ.get("RANK") or 0),
        "pid": os.getpid(),
        "gen": os.environ.get("PAI_LAUNCH_GENERATION", ""),
    }
    record.update(fields)
    say("PAI_EXAMPLE " + json.dumps(record))


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

# Harmless noise: numpy 2 vs. a conversion inside PAI, and torch's advice to move
# to forward_sync_buffers, which (unlike broadcast_buffers=False, needed here:
# see the docstring) still syncs buffers when DDP is built.
warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy")
warnings.filterwarnings("ignore", message="`broadcast_buffers` is deprecated")


def parse_args():
    p = argparse.ArgumentParser(description="PerforatedAI DDP/DataParallel demo")
    p.add_argument("--perforate_model_parallel", action="store_true",
                   help="init run: one batch in one process, save PAI tracker settings, exit")
    p.add_argument("--pai_load_folder", default=None,
                   help="DDP resume: load the newest switch_N.pt from this folder")
    p.add_argument("--pai-save-name", dest="pai_save_name", default="PAI",
                   help="PAI save folder, relative to the working directory (default: PAI)")
    p.add_argument("--seed", type=int, default=0, help="seed for data and weights (default: 0)")
    p.add_argument("--epochs-max", dest="epochs_max", type=int, default=30,
                   help="safety cap on epochs per process (default: 30)")
    p.add_argument("--switch-epochs", dest="switch_epochs", type=int, default=2,
                   help="epochs between dendrite additions (default: 2)")
    p.add_argument("--max-dendrites", dest="max_dendrites", type=int, default=2,
                   help="dendrites to add before training is complete (default: 2)")
    p.add_argument("--no-graphs", dest="graphs", action="store_false",
                   help="skip PAI's per-epoch PNG/CSV graphs (shorter epochs)")
    return p.parse_args()


class MLP(nn.Module):
    """Tiny classifier; PAI adds dendrites to its Linear layers."""

    def __init__(self, n_in=16, hidden=16, n_classes=4):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def make_data(seed, n_train=4096, n_val=1024, n_in=16, n_classes=4, per_class=3):
    """Gaussian clusters, several per class; the same on every rank for a seed."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(n_classes * per_class, n_in, generator=g)

    def sample(n):
        cluster = torch.randint(0, n_classes * per_class, (n,), generator=g)
        return centers[cluster] + torch.randn(n, n_in, generator=g), cluster % n_classes

    return sample(n_train), sample(n_val)


def batches(x, y, batch_size, gen):
    perm = torch.randperm(len(x), generator=gen)
    for i in range(0, len(x), batch_size):
        idx = perm[i:i + batch_size]
        yield x[idx], y[idx]


@torch.no_grad()
def evaluate(net, x, y, device):
    """Loss on the whole validation set, without DDP: every rank gets the same score."""
    net.eval()
    loss = F.cross_entropy(net(x.to(device)), y.to(device)).item()
    net.train()
    return loss


def configure_pai(args, device):
    """PAI: settings for a run with no prompts (no TUI, no pdb) and quick dendrites."""
    GPA.pc.set_device(device)
    GPA.pc.set_output_dimensions([-1, 0])          # Linear outputs are [batch, features]
    GPA.pc.set_configuration_confirmed(True)       # else perforate_model opens a TUI
    GPA.pc.set_unwrapped_modules_confirmed(True)   # else pdb.set_trace()
    GPA.pc.set_weight_decay_accepted(True)         # else pdb.set_trace()
    GPA.pc.set_testing_dendrite_capacity(False)    # a real run, not the capacity test
    GPA.pc.set_max_dendrites(args.max_dendrites)
    GPA.pc.set_switch_mode(GPA.pc.DOING_FIXED_SWITCH)  # add dendrites every N epochs
    GPA.pc.set_fixed_switch_num(args.switch_epochs)
    GPA.pc.set_first_fixed_switch_num(args.switch_epochs)
    # Without these two, a learning-rate search after the 2nd dendrite stalls switching.
    GPA.pc.set_dont_give_up_unless_learning_rate_lowered(False)
    GPA.pc.set_find_best_lr(False)
    GPA.pc.set_silent(True)                        # PAI's per-epoch chatter off


def in_turn(distributed, rank, world, fn):
    """Run fn() on one rank at a time, rank 0 first (race fixes, see docstring)."""
    if not distributed:
        return fn()
    result = None
    for turn in range(world):
        if turn == rank:
            result = fn()
        dist.barrier()
    return result


def mark_complete(save, rank, why):
    """The launcher's stop signal: SAVE/.training_complete (rank 0 writes it)."""
    if rank == 0:
        os.makedirs(save, exist_ok=True)
        with open(os.path.join(save, ".training_complete"), "w") as f:
            f.write(why + "\n")


def finish(event, distributed):
    """Exit 0; under DDP, only once every rank is done with PAI's files."""
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    emit(event)
    sys.exit(0)


def main():
    args = parse_args()
    save = args.pai_save_name
    init_run = args.perforate_model_parallel
    distributed = not init_run and "WORLD_SIZE" in os.environ
    rank = int(os.environ.get("RANK") or 0) if distributed else 0
    world = int(os.environ["WORLD_SIZE"]) if distributed else 1
    log = say if rank == 0 else (lambda line: None)

    if distributed and torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl")
    elif distributed:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    torch.manual_seed(args.seed)
    (train_x, train_y), (val_x, val_y) = make_data(args.seed)
    train_x, train_y = train_x[rank::world], train_y[rank::world]  # this rank's shard

    # PAI: settings, then perforate_model (one rank at a time: race fix 1).
    configure_pai(args, device)
    model = in_turn(distributed, rank, world, lambda: UPA.perforate_model(
        MLP(), save_name=save, maximizing_score=False, making_graphs=args.graphs))
    model = model.to(device)

    # PAI (DDP): resume from the newest switch_N.pt, before building the optimizer.
    if args.pai_load_folder is not None:
        numbers = []
        for f in glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")):
            try:
                numbers.append(int(os.path.basename(f)[len("switch_"):-len(".pt")]))
            except ValueError:
                pass
        if numbers:
            name = f"switch_{max(numbers)}"
            model = UPA.load_system(model, args.pai_load_folder, name, True).to(device)
            log(f"Loaded PAI state from {args.pai_load_folder}/{name}.pt")
        else:
            log(f"No switch_N.pt in {args.pai_load_folder}: starting from the beginning")

    # PAI: optimizer and scheduler are built by the tracker, which also steps the
    # scheduler inside add_validation_score (do not call scheduler.step()).
    GPA.pai_tracker.set_optimizer(torch.optim.Adam)
    GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)

    def build_optimizer(net):
        return GPA.pai_tracker.setup_optimizer(
            net, {"params": net.parameters(), "lr": 0.003}, {"step_size": 50, "gamma": 0.5})

    optimizer, scheduler = build_optimizer(model)

    # PAI: the wrappers need the tracker settings saved by the init run.
    if not init_run:
        GPA.pai_tracker.initialize_tracker_settings()
        if distributed:
            model = nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None,
                find_unused_parameters=True,  # PAI leaves some parameters unused
                broadcast_buffers=False)      # race fix 2
        else:
            model = nn.DataParallel(model)

    first_step = True
    shuffle = torch.Generator().manual_seed(args.seed + 1000 * rank)
    for epoch in range(args.epochs_max):
        for xb, yb in batches(train_x, train_y, 128, shuffle):
            optimizer.zero_grad()
            if distributed:
                # PAI (DDP): parameters left out of the graph still need a gradient
                # for DDP's allreduce, so every gradient starts at zero.
                for p in model.parameters():
                    if p.requires_grad and p.grad is None:
                        p.grad = torch.zeros_like(p)
            loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
            loss.backward()
            if init_run:
                # PAI: the init run saves the tracker settings after one batch.
                GPA.pai_tracker.save_tracker_settings()
                say(f"PAI settings saved in {save}/; now train without --perforate_model_parallel")
                emit("init_exit")
                sys.exit(0)
            optimizer.step()
            if first_step:
                emit("first_step")
                first_step = False

        score = evaluate(model.module, val_x, val_y, device)  # validation loss: lower is better
        emit("epoch", epoch=epoch, score=score)
        log(f"epoch {epoch}: validation loss {score:.4f}")

        # PAI: EVERY rank adds the same score (keeps their trackers in step), on the
        # unwrapped model, one rank at a time (race fix 3).
        net, restructured, complete = in_turn(
            distributed, rank, world,
            lambda: GPA.pai_tracker.add_validation_score(score, model.module))
        net = net.to(device)
        if complete:  # check first: restructured is also True at the end
            log("PAI: training complete")
            mark_complete(save, rank, "complete")
            finish("complete_exit", distributed)
        if restructured:  # PAI added dendrites: the model has new parameters
            if distributed:
                log("PAI: dendrites added; exiting for the launcher to start the next generation")
                finish("restructure_exit", distributed)
            log("PAI: dendrites added; continuing in this process")
            model = nn.DataParallel(net)
            optimizer, scheduler = build_optimizer(net)

    log(f"--epochs-max {args.epochs_max} reached before PAI finished: stopping")
    mark_complete(save, rank, "epochs_max")
    finish("complete_exit", distributed)


if __name__ == "__main__":
    main()
