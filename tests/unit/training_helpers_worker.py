"""One rank of a real 2-process gloo group (started by tests/unit/test_training_helpers.py) exercising
pai_launch.training's rank-aware helpers against a stand-in perforatedai that records every call.

Each rank appends lines to OUT/log (O_APPEND, one write each) and writes OUT/rank<R>.json; rank 0's
add_validation_score score is 10.0, rank 1's is 11.0. Ends with end_generation (exit 0).
"""

import json
import os
import sys
import types

out = os.environ["TRAINING_TEST_OUT"]
rank = int(os.environ["RANK"])


def record(line: str) -> None:
    fd = os.open(os.path.join(out, "log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def logged() -> list[str]:
    with open(os.path.join(out, "log")) as handle:
        return handle.read().splitlines()


def fake_add_validation_score(score, net):
    record(f"score rank={rank} score={score!r} net={type(net).__name__}")
    return net, rank == 0, False


# A stand-in perforatedai: the helpers import it lazily, so it is found here first.
tracker = types.SimpleNamespace(add_validation_score=fake_add_validation_score)
gpa = types.ModuleType("perforatedai.globals_perforatedai")
gpa.pai_tracker = tracker
package = types.ModuleType("perforatedai")
package.globals_perforatedai = gpa
sys.modules.update({"perforatedai": package, "perforatedai.globals_perforatedai": gpa})

import torch  # noqa: E402

from pai_launch import training as pt  # noqa: E402

run = pt.start(False)
assert run.distributed and run.world == 2 and run.rank == rank and run.device.type == "cpu", run


def turn():
    record(f"begin {rank}")
    seen = logged()  # rank 1's turn comes after rank 0's whole turn
    record(f"end {rank}")
    return {"rank": rank, "seen_before": seen}


result = pt.in_turn(run, turn)
model = pt.wrap_ddp(run, torch.nn.Linear(2, 2))
net, restructured, complete = pt.add_validation_score(run, 10.0 + rank, model)
with open(os.path.join(out, f"rank{rank}.json"), "w") as handle:
    json.dump({"in_turn": result, "wrapped": type(model).__name__, "returned": type(net).__name__,
               "restructured": restructured, "complete": complete}, handle)
pt.end_generation(run)
