"""A preload module that leaves the forkserver looking as if CUDA had been initialised in it (as a CUDA call at
import would on a GPU machine): the agent's self-check must refuse to fork from that server."""

import torch

torch.cuda.is_initialized = lambda: True
