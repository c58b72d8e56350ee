"""A restructure inside the running workers (--restructure in-process): DDP rebuilt around the new model, no exit.

PerforatedAI's DDP recipe ends every worker at a restructure, and the next generation rebuilds all the script set up
(data, model, process group; on GPUs the CUDA context and communicators). Its single-process and DataParallel modes
restructure in place instead; under DDP the same holds on three conditions, which `rewrap` keeps: every rank scored
rank 0 first (training.add_validation_score), the new DDP broadcasts no buffers (PerforatedAI's tracker buffer has a
length of its own on each rank), and the optimizer and scheduler are built anew for the new parameters. It frees the
old wrapper's reducer and the old optimizer's state, and checks that every rank holds the same model: the same
parameter names and shapes before the wrap (a clear line instead of DDP's own shape error), the same values after
it (DDP's constructor broadcast rank 0's). A difference ends the process with one line naming the rank.

Rank 0 tells the launcher in a small JSON record per restructure (PAI_LAUNCH_RESTRUCTURES, a folder in the save
folder's .pai-launch): which switch file, how long from that file's write to training again, memory before and after.
Runs in the user's process: the standard library, savefmt, and torch on first use.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pai_launch import backends
from pai_launch.savefmt import savedir
from pai_launch.savefmt.atomic import write_atomically

#: The launcher's choice for the run: "in-process" or "restart" (what the workers get from --restructure).
MODE_ENV = "PAI_LAUNCH_RESTRUCTURE"
IN_PROCESS = "in-process"
RESTART = "restart"
#: Where rank 0 leaves one record per in-process restructure, for the launcher to log (set with in-process only).
RECORDS_ENV = "PAI_LAUNCH_RESTRUCTURES"
#: The save folder, absolute, as the launcher sees it: the record names its newest switch file.
SAVE_DIR_ENV = "PAI_LAUNCH_SAVE_DIR"
#: Relative tolerance of the value check: checksums of bit-identical parameters agree far closer on any device.
VALUE_RTOL = 1e-9


def chosen(env: dict[str, str] | None = None) -> bool:
    """True when the launcher asked for in-process restructures (--restructure in-process)."""
    return (os.environ if env is None else env).get(MODE_ENV) == IN_PROCESS


@dataclass(frozen=True)
class Record:
    """One in-process restructure as rank 0 saw it; the launcher logs it as restructured_in_process."""

    switch: str | None
    resumed_s: float | None
    rewrap_s: float
    ranks: int
    parameters: int
    memory_before: int | None
    memory_after: int | None
    at: float


class ModelsDiffer(SystemExit):
    """The ranks hold different models after a restructure; ends the process with its one line (exit 1)."""


def _signature(net) -> list[tuple[str, tuple[int, ...]]]:
    return [(name, tuple(p.shape)) for name, p in net.named_parameters()]


def structure_difference(mine: list, theirs: list) -> str | None:
    """The first difference between two models' (name, shape) lists, in words; None when they are the same (pure)."""
    for (name, shape), (name0, shape0) in zip(mine, theirs):
        if name != name0:
            return f"parameter {name!r} where rank 0 has {name0!r}"
        if shape != shape0:
            return f"{name} has shape {list(shape)}, rank 0's {list(shape0)}"
    if len(mine) != len(theirs):
        return f"{len(mine)} parameters, rank 0 has {len(theirs)}"
    return None


def value_difference(names: list[str], mine: list[float], rank0: list[float], rtol: float = VALUE_RTOL) -> str | None:
    """The first parameter whose checksum differs from rank 0's beyond `rtol`, in words; None when none does (pure)."""
    for name, a, b in zip(names, mine, rank0):
        if abs(a - b) > rtol * max(abs(a), abs(b), 1e-30):
            return f"{name} sums to {a!r}, rank 0's to {b!r}"
    return None


def _device_of(run):
    import torch
    import torch.distributed as dist

    return run.device if backends.uses_nccl(dist.get_backend()) else torch.device("cpu")


def check_structure(run, net) -> None:
    """Every rank's parameter names and shapes equal rank 0's, or ModelsDiffer naming the first rank that differs."""
    import torch.distributed as dist

    signatures: list[Any] = [None] * run.world
    dist.all_gather_object(signatures, _signature(net))
    for rank, theirs in enumerate(signatures):
        difference = structure_difference(theirs, signatures[0])
        if difference is not None:
            raise ModelsDiffer(f"pai-launch: after the restructure rank {rank}'s model differs from rank 0's: "
                               f"{difference}; every rank must score rank 0 first (training.add_validation_score)")


def checksums(net, device):
    """Per parameter, its sum and its sum of squares in float64, as one tensor on `device`. Each sum is moved there
    before they are stacked: a restructured net may hold parameters on more than one device, and an empty one's
    zero must not land on the CPU beside a GPU's sums."""
    import torch

    sums = []
    with torch.no_grad():
        for p in net.parameters():
            squares = torch.sum(p.to(torch.float64) ** 2) if p.numel() else torch.zeros((), dtype=torch.float64)
            sums += [torch.sum(p, dtype=torch.float64).to(device), squares.to(device)]
    return torch.stack(sums) if sums else torch.zeros(0, dtype=torch.float64, device=device)


def check_values(run, net) -> None:
    """Every rank's parameter checksums equal rank 0's, or ModelsDiffer naming the rank and the parameter."""
    import torch.distributed as dist

    device = _device_of(run)
    mine = checksums(net, device)
    gathered = [mine.clone() for _ in range(run.world)]
    dist.all_gather(gathered, mine)
    names = [f"{name} ({what})" for name, _ in net.named_parameters() for what in ("sum", "sum of squares")]
    rank0 = gathered[0].tolist()
    for rank, theirs in enumerate(gathered):
        difference = value_difference(names, theirs.tolist(), rank0)
        if difference is not None:
            raise ModelsDiffer(f"pai-launch: after the restructure rank {rank}'s parameters differ from rank 0's: "
                               f"{difference}")


def release(model, optimizer) -> None:
    """Drop what the old wrapper and optimizer hold: the reducer's hooks and buckets, the old module, the process
    group (or destroy_process_group could not free it), the optimizer's state. The caller's names still point at
    them; what they hold is gone now, not at the next collection."""
    import torch.nn as nn

    if isinstance(model, nn.parallel.DistributedDataParallel):
        remove_hooks = getattr(model, "_remove_autograd_hooks", None)
        if remove_hooks is not None:
            remove_hooks()
        for name in ("reducer", "logger", "process_group"):
            if hasattr(model, name):
                delattr(model, name)
    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)) and "module" in model._modules:
        del model.module
    if optimizer is not None:
        optimizer.state.clear()
        optimizer.param_groups.clear()


def _memory(device) -> int | None:
    if device.type != "cuda":
        return None
    import torch

    return int(torch.cuda.memory_allocated(device))


def rewrap(run, net, model, optimizer, build_optimizer: Callable[[Any], Any], wrap: Callable[[Any, Any], Any]):
    """(new wrapper, build_optimizer(net)) for the restructured `net`, the old `model` and `optimizer` released;
    rank 0 records the restructure for the launcher. Every rank must call it (it runs collectives)."""
    import torch.distributed as dist

    started = time.time()
    before = _memory(run.device)
    release(model, optimizer)
    del model, optimizer
    gc.collect()
    if run.device.type == "cuda":
        import torch

        torch.cuda.empty_cache()
    wrapped = None
    try:
        check_structure(run, net)
        wrapped = wrap(run, net)
        check_values(run, net)
    except ModelsDiffer:
        wrapped = None
        _leave_group()
        raise
    built = build_optimizer(net)
    dist.barrier()
    after = _memory(run.device)
    if run.rank == 0:
        record(Record(switch=None, resumed_s=None, rewrap_s=round(time.time() - started, 4), ranks=run.world,
                      parameters=sum(p.numel() for p in net.parameters()), memory_before=before, memory_after=after,
                      at=time.time()))
    return wrapped, built


def _leave_group() -> None:
    """Before ModelsDiffer ends the process: the new wrapper dropped and the process group torn down now, so its
    threads are joined while Python runs, not in the interpreter's teardown (an abort there: exit -6, not 1)."""
    import torch.distributed as dist

    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def record(entry: Record, env: dict[str, str] | None = None) -> Path | None:
    """Write rank 0's record of one restructure where the launcher reads it (PAI_LAUNCH_RESTRUCTURES), named after
    the newest switch file; the time to resume is counted from that file's write. None: no launcher to tell."""
    env = os.environ if env is None else env
    folder, save = env.get(RECORDS_ENV), env.get(SAVE_DIR_ENV)
    if not folder or not save:
        return None
    switch = savedir.newest_switch(Path(save))
    resumed = None
    if switch is not None:
        try:
            resumed = round(max(0.0, entry.at - os.stat(Path(save, switch)).st_mtime), 4)
        except OSError:
            pass
    entry = Record(**{**asdict(entry), "switch": switch, "resumed_s": resumed})
    path = Path(folder, f"{Path(switch).stem if switch else 'restructure'}.json")
    try:
        write_atomically(path, json.dumps(asdict(entry)).encode())
    except OSError:
        return None  # the launcher's own folder is not ours to fail the training over
    return path
