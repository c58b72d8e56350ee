# PerforatedAI's single-GPU example style, moved to DDP naively: the DDP wrapper goes to add_validation_score,
# DDP keeps its defaults, every rank perforates at once, and restructured is acted on before training_complete.
# Data for tests/unit/test_doctor.py: read, never run.
import argparse
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA


def train(args, model, train_loader, optimizer):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        F.nll_loss(model(data), target).backward()
        if(args.perforate_model_parallel):
            GPA.pai_tracker.save_tracker_settings()
            sys.exit(0)
        optimizer.step()


def test(model, test_loader, optimizer, scheduler, args):
    correct = sum(model(d).argmax(dim=1).eq(t).sum().item() for d, t in test_loader)
    #Add the new score to the tracker which may restructured the model with PB Nodes
    model, restructured, training_complete = GPA.pai_tracker.add_validation_score(100. * correct,
    model)
    #If it was restructured the generation is over
    if(restructured):
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        sys.exit(0)
    return model, optimizer, scheduler, training_complete


def main():
    parser = argparse.ArgumentParser(description='PyTorch Example')
    parser.add_argument('--perforate_model_parallel', action='store_true', default=False)
    parser.add_argument('--pai_load_folder', type=str, default=None)
    args = parser.parse_args()
    if(not args.perforate_model_parallel):
        torch.distributed.init_process_group('gloo')
    loader = [(torch.randn(8, 16), torch.randint(0, 4, (8,)))]

    GPA.pc.set_configuration_confirmed(True)
    GPA.pc.set_unwrapped_modules_confirmed(True)
    GPA.pc.set_weight_decay_accepted(True)
    model = UPA.perforate_model(nn.Sequential(nn.Linear(16, 4), nn.LogSoftmax(dim=1)), save_name='PAI')
    if(args.pai_load_folder is not None):
        model = UPA.load_system(model, args.pai_load_folder, 'latest', True)

    optimArgs = {'params': model.parameters(), 'lr': 1.0}
    schedArgs = {'step_size': 1, 'gamma': 0.7}
    optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, optimArgs, schedArgs)
    if(not args.perforate_model_parallel):
        GPA.pai_tracker.initialize_tracker_settings()
        model = DistributedDataParallel(model)

    for epoch in range(1, 10000):
        train(args, model, loader, optimizer)
        model, optimizer, scheduler, training_complete = test(model, loader, optimizer, scheduler, args)
        if(training_complete):
            if(torch.distributed.get_rank() == 0):
                open('PAI/.training_complete', 'w').write('done')
            break


if __name__ == '__main__':
    main()
