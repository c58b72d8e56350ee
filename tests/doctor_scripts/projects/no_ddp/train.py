# A project whose DDP set-up is in a module the project does not have (installed elsewhere, or missing), reached
# through `sys.path.insert(0, "src")`. Data for tests/unit/test_doctor.py: read, never run.
import argparse
import sys

sys.path.insert(0, "src")

import torch  # noqa: E402
from common.helpers import perforate, score, settings_then_exit  # noqa: E402
from distributed_utils import init_distributed_mode  # noqa: E402
from perforatedai import globals_perforatedai as GPA  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
args = parser.parse_args()

init_distributed_mode(args)
model = perforate()
GPA.pai_tracker.set_optimizer(torch.optim.SGD)
optimizer, scheduler = GPA.pai_tracker.setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})
for epoch in range(10):
    model(torch.randn(4, 8)).sum().backward()
    if args.perforate_model_parallel:
        settings_then_exit()
    optimizer.step()
    model, restructured, complete = score(model)
    if complete:
        open("PAI/.training_complete", "w").write("complete\n")
        break
