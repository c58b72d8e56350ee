# Correct, in the style of PerforatedAI's own examples (train()/test() functions, optimArgs/schedArgs),
# with rank 0 adding the score and broadcasting the results. Data for tests/unit/test_doctor.py: never run.
import argparse
import os
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.optim.lr_scheduler import StepLR

from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    #Loop over all the batches in the dataset
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data.to(device)), target.to(device))
        #Backpropagate the error through the network
        loss.backward()
        #The init run only needs one batch to save its settings
        if(args.perforate_model_parallel):
            GPA.pai_tracker.save_tracker_settings()
            sys.exit(0)
        optimizer.step()


def test(model, device, test_loader, optimizer, scheduler, args):
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            correct += model(data.to(device)).argmax(dim=1).eq(target.to(device)).sum().item()
    flags = [False, False]
    #Rank 0 adds the score, then shares what the tracker decided
    if(args.rank == 0):
        model, restructured, training_complete = GPA.pai_tracker.add_validation_score(100. * correct, model)
        flags = [restructured, training_complete]
    dist.broadcast_object_list(flags, src=0)
    return model, optimizer, scheduler, flags[0], flags[1]


def main():
    parser = argparse.ArgumentParser(description='PerforatedAI DDP Example')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR')
    parser.add_argument('--perforate_model_parallel', action='store_true', default=False)
    parser.add_argument('--pai_load_folder', type=str, default=None)
    parser.add_argument('--save-name', type=str, default='PAIExample')
    args = parser.parse_args()
    if(not args.perforate_model_parallel):
        dist.init_process_group('gloo')
    args.rank = dist.get_rank() if not args.perforate_model_parallel else 0
    device = torch.device("cpu")
    train_loader = test_loader = [(torch.randn(8, 16), torch.randint(0, 4, (8,)))]

    #Set up some global parameters for PAI code
    GPA.pc.set_testing_dendrite_capacity(False)
    GPA.pc.set_configuration_confirmed(True)
    GPA.pc.set_unwrapped_modules_confirmed(True)
    GPA.pc.set_weight_decay_accepted(True)

    model = None
    world = 1 if args.perforate_model_parallel else dist.get_world_size()
    for turn in range(world):
        if(turn == args.rank):
            model = UPA.perforate_model(Net(), save_name=args.save_name)
        if(not args.perforate_model_parallel):
            dist.barrier()
    if(args.pai_load_folder is not None):
        model = UPA.load_system(model, args.pai_load_folder, 'latest', True)
    model = model.to(device)

    #Setup the optimizer and scheduler
    GPA.pai_tracker.set_optimizer(torch.optim.Adadelta)
    GPA.pai_tracker.set_scheduler(StepLR)
    optimArgs = {'params': model.parameters(), 'lr': args.lr}
    schedArgs = {'step_size': 1, 'gamma': 0.7}
    optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, optimArgs, schedArgs)
    if(not args.perforate_model_parallel):
        GPA.pai_tracker.initialize_tracker_settings()
        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, broadcast_buffers=False)

    #Run your epochs of training and testing
    for epoch in range(1, 10000):
        train(args, model, device, train_loader, optimizer, epoch)
        net, optimizer, scheduler, restructured, training_complete = test(
            model.module, device, test_loader, optimizer, scheduler, args)
        if(training_complete):
            if(args.rank == 0):
                open(os.path.join(args.save_name, '.training_complete'), 'w').write('done')
        if(training_complete or restructured):
            dist.barrier()
            dist.destroy_process_group()
            sys.exit(0)


if __name__ == '__main__':
    main()
