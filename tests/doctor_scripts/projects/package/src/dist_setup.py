"""The process group, started when the module is imported."""
import torch.distributed as dist

dist.init_process_group("gloo")
RANK = dist.get_rank()
WORLD = dist.get_world_size()
