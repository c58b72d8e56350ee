"""PerforatedAI training under torch DDP (or DataParallel): the pai-launch demo.

A tiny MLP learns to classify Gaussian clusters generated in-process from
--seed, while PerforatedAI (PAI) adds dendrites to its Linear layers.  It is
meant to be read as the model for adapting your own script: the PAI-specific
parts are marked "PAI:", and the distributed boilerplate comes from
pai_launch.training (imported as pt), one call per step of the recipe.

Three ways to run it:

1. Init run (once, one process, no process group):
       python train_pai_ddp.py --perforate_model_parallel
   Runs one batch, saves PAI's tracker settings (SAVE/array_dims.csv), exits 0.

2. A DDP generation, started by pai-launch or torchrun (WORLD_SIZE/RANK/LOCAL_RANK):
       pai-launch --nproc 2 train_pai_ddp.py
   Trains until PAI restructures the model (adds dendrites); then every rank
   exits 0 and the launcher starts the next generation with --pai_load_folder
   SAVE, which resumes from the newest whole SAVE/switch_N.pt.  When PAI says
   training is complete, rank 0 writes SAVE/.training_complete and every rank
   exits 0.

3. DataParallel: after the init run, a plain `python train_pai_ddp.py`
   (pai-launch --data-parallel).  Restructures happen in-process.

With pai-launch --restructure in-process, a DDP generation does not end at a
restructure either: pt.after_restructure rebuilds DDP around the new model and
the optimizer through the tracker, and the same workers train on.

SAVE is --pai-save-name (default PAI), relative to the working directory.

The recipe as published has races; the helpers fix them:
  * pt.perforate_model: the ranks call UPA.perforate_model in turn, since each
    rewrites SAVE/<save>_config.json while the others read it.
  * pt.wrap_ddp: DDP(find_unused_parameters=True, broadcast_buffers=False);
    PAI's tracker buffer differs in length per rank, and broadcasting it
    aborts gloo/nccl mid-training.
  * pt.add_validation_score: rank 0's score on every rank, in turn, rank 0
    first (at a switch every rank reads SAVE/best_model.pt, which rank 0 may
    be rewriting).

For benchmarks, progress lines go to stdout, one JSON object each:
    PAI_EXAMPLE {"event": ..., "t": ..., "rank": ..., "pid": ..., "gen": ...}
events: process_start, cuda_ready (the process's first CUDA call returned: on a
GPU only), first_step (also the first step after an in-process restructure;
with the backend and, on NCCL, the class torch picked for it), epoch (+ "epoch", "score"), switched (a restructure's
switch file
is written), restructured (in-process), and the last one of the process:
init_exit, restructure_exit or complete_exit.
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
import warnings  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from perforatedai import globals_perforatedai as GPA  # noqa: E402

from pai_launch import training as pt  # noqa: E402

# Harmless noise: numpy 2 vs. a conversion inside PAI.
warnings.filterwarnings("ignore", message="__array__ implementation doesn't accept a copy")


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
    p.add_argument("--prepare-seconds", dest="prepare_seconds", type=float, default=0.0,
                   help="CPU work before training, standing in for a real data set's preparation (decoding, "
                        "augmenting, tokenizing) that every new process pays; benchmarks use it (default: 0)")
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


def prepare(seconds, seed):
    """Busy the CPU for `seconds` as a real script's data preparation would (each new process pays it again)."""
    g = torch.Generator().manual_seed(seed)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        a = torch.randn(128, 128, generator=g)
        (a @ a.T).softmax(dim=1).sum()


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


def leave(event, end, run):
    """end(run), which may exit 0 (pt.init_run_done, pt.end_generation, pt.after_restructure); the process's last
    progress line goes out as it does. What end returns, when it does."""
    try:
        return end(run)
    except SystemExit as exc:
        if exc.code in (0, None):
            emit(event)
        raise


def main():
    args = parse_args()
    save = args.pai_save_name
    run = pt.start(args.perforate_model_parallel)  # PAI (DDP): the process group, unless this is the init run
    device = run.device
    log = say if run.rank == 0 else (lambda line: None)
    if device.type == "cuda":
        torch.ones(1, device=device).sum().item()  # the first CUDA call: a context on this process's GPU
        emit("cuda_ready")

    torch.manual_seed(args.seed)
    if not run.init_run:
        prepare(args.prepare_seconds, args.seed)
    (train_x, train_y), (val_x, val_y) = make_data(args.seed)
    train_x, train_y = train_x[run.rank::run.world], train_y[run.rank::run.world]  # this rank's shard

    # PAI: no prompts (no TUI, no pdb, quiet), and quick dendrites.
    pt.configure_without_prompts(
        device=device,
        output_dimensions=[-1, 0],                  # Linear outputs are [batch, features]
        testing_dendrite_capacity=False,            # a real run, not the capacity test
        max_dendrites=args.max_dendrites,
        switch_mode=GPA.pc.DOING_FIXED_SWITCH,      # add dendrites every N epochs
        fixed_switch_num=args.switch_epochs,
        first_fixed_switch_num=args.switch_epochs,
        # Without these two, a learning-rate search after the 2nd dendrite stalls switching.
        dont_give_up_unless_learning_rate_lowered=False,
        find_best_lr=False)
    model = pt.perforate_model(run, MLP(), save_name=save, maximizing_score=False,
                               making_graphs=args.graphs).to(device)

    # PAI (DDP): resume from the newest whole switch_N.pt, before building the optimizer.
    model = pt.load_newest(run, model, args.pai_load_folder)

    # PAI: optimizer and scheduler are built by the tracker, which also steps the
    # scheduler inside add_validation_score (do not call scheduler.step()).
    GPA.pai_tracker.set_optimizer(torch.optim.Adam)
    GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)

    def build_optimizer(net):
        return GPA.pai_tracker.setup_optimizer(
            net, {"params": net.parameters(), "lr": 0.003}, {"step_size": 50, "gamma": 0.5})

    optimizer, scheduler = build_optimizer(model)

    # PAI: the wrappers need the tracker settings saved by the init run.
    if not run.init_run:
        GPA.pai_tracker.initialize_tracker_settings()
    model = pt.wrap_ddp(run, model)  # DDP, DataParallel, or (init run) the model itself

    first_step = True
    shuffle = torch.Generator().manual_seed(args.seed + 1000 * run.rank)
    for epoch in range(args.epochs_max):
        for xb, yb in batches(train_x, train_y, 128, shuffle):
            optimizer.zero_grad()
            if run.distributed:
                pt.zero_missing_grads(model)  # PAI (DDP): the allreduce needs every gradient
            loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
            loss.backward()
            if run.init_run:
                leave("init_exit", pt.init_run_done, run)  # PAI: settings saved after one batch
            optimizer.step()
            if first_step:
                emit("first_step", backend=torch.distributed.get_backend() if run.distributed else None,
                     nccl_class=pt.nccl_class(run))
                first_step = False

        score = evaluate(model.module, val_x, val_y, device)  # validation loss: lower is better
        emit("epoch", epoch=epoch, score=score)
        log(f"epoch {epoch}: validation loss {score:.4f}")

        # PAI: every rank adds rank 0's score (keeps the trackers in step), in turn.
        net, restructured, complete = pt.add_validation_score(run, score, model)
        if restructured and not complete:
            emit("switched")  # the switch file is written: a benchmark's restart gap runs from here
        if complete:  # check first: restructured is also True at the end
            log("PAI: training complete")
            pt.mark_complete(run, save, "complete")
            leave("complete_exit", pt.end_generation, run)
        if restructured:  # PAI added dendrites: the model has new parameters
            # PAI (DDP): exit for the launcher to start the next generation, or with --restructure in-process (and
            # always under DataParallel) rebuild DDP and the optimizer here and train on.
            model, (optimizer, scheduler) = leave(
                "restructure_exit", lambda run: pt.after_restructure(run, net, model, optimizer, build_optimizer), run)
            emit("restructured")
            log("PAI: dendrites added; training on in this process")
            first_step = True

    log(f"--epochs-max {args.epochs_max} reached before PAI finished: stopping")
    pt.mark_complete(run, save, "epochs_max")
    leave("complete_exit", pt.end_generation, run)


if __name__ == "__main__":
    main()
