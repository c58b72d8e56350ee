"""The fake trainer, run through a script whose source breaks the protocol where doctor reads it: no flags of its
own, and a DDP wrapper that broadcasts buffers (never called). pai-launch warns and still runs it."""

import runpy
import sys
from pathlib import Path


def wrap(model):
    import torch
    from perforatedai import utils_perforatedai as UPA  # noqa: F401 - what makes doctor read it as a PerforatedAI script

    return torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)


if __name__ == "__main__":
    trainer = str(Path(__file__).resolve().parent.parent / "fake_trainer.py")
    sys.argv[0] = trainer
    runpy.run_path(trainer, run_name="__main__")
