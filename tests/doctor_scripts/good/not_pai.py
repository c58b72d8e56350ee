# A plain torch DDP script with no PerforatedAI in it. Data for tests/unit/test_doctor.py: never run.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
torch.optim.SGD(model.parameters(), lr=0.1).step()
