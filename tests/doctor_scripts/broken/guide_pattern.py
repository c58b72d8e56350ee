# The PerforatedAI DDP pattern as commonly published, assembled into one script.
# Data for tests/unit/test_doctor.py: read, never run.
import argparse
import os
import sys

import torch
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA

parser = argparse.ArgumentParser()
parser.add_argument('--perforate_model_parallel', action='store_true',
                    help='Initialize PAI settings for DDP (run once)')
parser.add_argument('--pai_load_folder', type=str, default=None,
                    help='Folder to load PAI state from (for automatic resumption)')
args = parser.parse_args()
args.distributed = not args.perforate_model_parallel and 'WORLD_SIZE' in os.environ
if args.distributed:
    torch.distributed.init_process_group('gloo')
save_name = "PAI"
device = torch.device('cpu')
GPA.pc.set_configuration_confirmed(True)
GPA.pc.set_unwrapped_modules_confirmed(True)
GPA.pc.set_weight_decay_accepted(True)

model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
model = UPA.perforate_model(model, save_name=save_name, maximizing_score=True)
model = model.to(device)

# Load checkpoint if resuming from dendrite restructure (DDP mode)
if args.pai_load_folder is not None:
    import glob
    switch_files = glob.glob(f"{args.pai_load_folder}/switch_*.pt")
    if switch_files:
        switch_numbers = []
        for f in switch_files:
            try:
                switch_numbers.append(int(f.split('switch_')[1].split('.pt')[0]))
            except ValueError:
                pass
        if switch_numbers:
            max_switch = max(switch_numbers)
            model = UPA.load_system(model, args.pai_load_folder, f'switch_{max_switch}', True)

GPA.pai_tracker.set_optimizer(torch.optim.Adam)
GPA.pai_tracker.set_scheduler(torch.optim.lr_scheduler.StepLR)
optimArgs = {'params': model.parameters(), 'lr': 0.001}
schedArgs = {'step_size': 30, 'gamma': 0.1}
optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, optimArgs, schedArgs)

if not args.perforate_model_parallel:
    GPA.pai_tracker.initialize_tracker_settings()
    model = torch.nn.parallel.DistributedDataParallel(
        model,
        device_ids=None,
        find_unused_parameters=True
    )

train_loader = [(torch.randn(4, 8), torch.randint(0, 2, (4,)))] * 8
while True:
    for data, target in train_loader:
        optimizer.zero_grad()
        if args.distributed:
            for param in model.parameters():
                if param.requires_grad and param.grad is None:
                    param.grad = torch.zeros_like(param)
        loss = nn.functional.cross_entropy(model(data), target)
        loss.backward()
        if args.perforate_model_parallel:
            GPA.pai_tracker.save_tracker_settings()
            print(f"PAI DDP settings saved to {save_name}/")
            torch.distributed.barrier()
            exit(0)
        optimizer.step()

    val_acc = 0.5
    if args.distributed:
        model_unwrapped = model.module
        model_unwrapped, restructured, training_complete = GPA.pai_tracker.add_validation_score(val_acc, model_unwrapped)
    else:
        model, restructured, training_complete = GPA.pai_tracker.add_validation_score(val_acc, model)
        model = model.to(device)

    if training_complete:
        if args.distributed:
            if torch.distributed.get_rank() == 0:
                os.makedirs(save_name, exist_ok=True)
                with open(f"{save_name}/.training_complete", "w") as f:
                    f.write("complete")
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
        sys.exit(0)
    elif restructured:
        if args.distributed:
            torch.distributed.barrier()
            torch.distributed.destroy_process_group()
        exit(0)
