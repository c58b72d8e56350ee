"""Helpers for a PerforatedAI training script run by pai-launch (or torchrun): the DDP pattern, race-free.

Every call is safe in all three ways a script runs: the init run (--perforate_model_parallel, one process, no
process group), a DDP generation, and DataParallel. examples/train_pai_ddp.py uses each of them.

Only the standard library and pai_launch.savefmt (stdlib only: the save folder's format, the one the launcher
checks switch files and writes markers with) are imported here; torch and perforatedai are imported on first use,
and nothing of the supervisor is, so a worker imports this module for free.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from pai_launch import backends, in_process
from pai_launch.savefmt import checkpoint, savedir
from pai_launch.savefmt.atomic import write_atomically

if TYPE_CHECKING:
    import torch

T = TypeVar("T")

MARKER = savedir.MARKER


@dataclass(frozen=True)
class Run:
    """Where this process stands: DDP or not, its rank among `world`, its device, and whether it is the init run."""

    distributed: bool
    rank: int
    world: int
    local_rank: int
    device: "torch.device"
    init_run: bool


def _say(run: Run, line: str) -> None:
    """One line on stdout from rank 0, in one write (the ranks share stdout)."""
    if run.rank == 0:
        print(line + "\n", end="", flush=True)


def _gpa():
    from perforatedai import globals_perforatedai as GPA

    return GPA


def _upa():
    from perforatedai import utils_perforatedai as UPA

    return UPA


def start(init_run: bool, backend: str | None = None) -> Run:
    """The process's Run. `init_run` is the script's --perforate_model_parallel. Under torchrun or pai-launch
    (WORLD_SIZE set) and not in the init run, the process group is started: nccl on CUDA (the device taken
    from LOCAL_RANK, and bound to the group, which NCCL2 otherwise guesses), gloo on CPU, or `backend`."""
    import torch

    if init_run or "WORLD_SIZE" not in os.environ:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return Run(False, 0, 1, 0, device, init_run)
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK") or 0)
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        # Imported before the group exists: its functions take the default group as a default argument, bound at
        # import, and DDP's first import of torch._dynamo imports them. Bound to the group, they keep it alive after
        # destroy_process_group, and gloo's threads then outlive Python, which can abort the exit (-6).
        import torch.distributed.nn.functional  # noqa: F401
        name = backend or ("nccl" if device.type == "cuda" else "gloo")
        bound = {"device_id": device} if device.type == "cuda" and backends.uses_nccl(name) else {}
        dist.init_process_group(name, **bound)
    return Run(True, dist.get_rank(), dist.get_world_size(), local_rank, device, False)


def nccl_class(run: Run) -> str | None:
    """The class of NCCL backend the process group runs on (ProcessGroupNCCL, or ProcessGroupNCCL2 where torch
    picked it for `nccl`), else None: what TORCH_DIST_USE_NCCL2 chose, for a log line or a check."""
    if not run.distributed or run.device.type != "cuda":
        return None
    import torch.distributed as dist

    return backends.group_kind(dist.group.WORLD)


def configure_without_prompts(**settings: Any) -> None:
    """No terminal UI, no pdb.set_trace() and no per-epoch chatter from PerforatedAI; call before
    perforate_model. Each extra `name=value` is passed on as GPA.pc.set_<name>(value)."""
    pc = _gpa().pc
    pc.set_configuration_confirmed(True)
    pc.set_unwrapped_modules_confirmed(True)
    pc.set_weight_decay_accepted(True)
    pc.set_silent(True)
    for name, value in settings.items():
        setter = getattr(pc, f"set_{name}", None)
        if not callable(setter):
            raise TypeError(f"perforatedai has no setting {name!r} (no GPA.pc.set_{name})")
        setter(value)


def in_turn(run: Run, fn: Callable[[], T]) -> T:
    """fn() on one rank at a time, rank 0 first, with a barrier after each turn; this rank's result.
    For PerforatedAI calls that write files other ranks read."""
    if not run.distributed:
        return fn()
    import torch.distributed as dist

    result: Any = None
    for turn in range(run.world):
        if turn == run.rank:
            result = fn()
        dist.barrier()
    return result


def perforate_model(run: Run, model, **kwargs):
    """UPA.perforate_model(model, **kwargs), one rank at a time: every rank rewrites SAVE/<save>_config.json,
    which the others read. The model stays where it is: move it to run.device."""
    return in_turn(run, lambda: _upa().perforate_model(model, **kwargs))


def _switches(folder) -> list[tuple[int, str]]:
    """(N, name) of every switch_N.pt in folder, newest (highest N) first."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = [(number, name) for name in names if (number := savedir.switch_number(name)) is not None]
    return sorted(found, reverse=True)


def newest_switch(folder) -> str | None:
    """The name ("switch_N") of the newest whole switch_N.pt in folder; a torn one is skipped for the one
    before. None when there is none (or folder is None)."""
    if folder is None:
        return None
    for number, name in _switches(folder):
        if checkpoint.problem(Path(folder, name)) is None:  # the launcher's own check: one verdict
            return f"switch_{number}"
    return None


def load_newest(run: Run, model, folder):
    """The model loaded from the newest whole switch_N.pt in `folder` (UPA.load_system) on run.device, or the
    model unchanged when `folder` is None or holds none. Under DDP rank 0 chooses and every rank loads that one."""
    if folder is None:
        _say(run, "No --pai_load_folder: starting from the beginning")
        return model
    name = newest_switch(folder)
    if run.distributed:
        import torch.distributed as dist

        chosen = [name]
        dist.broadcast_object_list(chosen, src=0)
        name = chosen[0]
    if name is None:
        _say(run, f"No valid switch_N.pt in {folder}: starting from the beginning")
        return model
    skipped = [n for number, n in _switches(folder) if number > int(name[len("switch_"):])]
    if skipped:
        _say(run, f"Skipped incomplete {', '.join(skipped)} in {folder}")
    model = _upa().load_system(model, str(folder), name, True).to(run.device)
    _say(run, f"Loaded PAI state from {folder}/{name}.pt")
    return model


def wrap_ddp(run: Run, model):
    """DDP with the flags PerforatedAI needs (unused parameters; no buffer broadcast: its tracker buffer's length
    differs per rank); DataParallel when not distributed; the model itself in the init run."""
    if run.init_run:
        return model
    import torch.nn as nn

    if not run.distributed:
        return nn.DataParallel(model)
    with warnings.catch_warnings():  # torch's advice to use forward_sync_buffers, which syncs buffers at init
        warnings.filterwarnings("ignore", message="`broadcast_buffers` is deprecated")
        return nn.parallel.DistributedDataParallel(
            model, device_ids=[run.device.index] if run.device.type == "cuda" else None,
            find_unused_parameters=True, broadcast_buffers=False)


def zero_missing_grads(model) -> None:
    """A zero gradient for every trainable parameter without one: DDP's allreduce needs them all.
    Call after optimizer.zero_grad(), before backward."""
    import torch

    for p in model.parameters():
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)


def init_run_done(run: Run) -> NoReturn:
    """End the init run: save PerforatedAI's tracker settings (SAVE/array_dims.csv), exit 0."""
    _gpa().pai_tracker.save_tracker_settings()
    _say(run, "PAI settings saved; now train without --perforate_model_parallel")
    sys.exit(0)


def _unwrapped(model):
    import torch.nn as nn

    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
        return model.module
    return model


def add_validation_score(run: Run, score: float, model):
    """GPA.pai_tracker.add_validation_score on every rank with rank 0's score (so the trackers stay in step), one
    rank at a time, rank 0 first (at a switch every rank reads SAVE/best_model.pt, which rank 0 writes).
    `model` may be DDP/DataParallel-wrapped. Returns (net on run.device, restructured, training_complete);
    check training_complete first: restructured is True as well at the end."""
    if run.distributed:
        import torch
        import torch.distributed as dist

        on = run.device if backends.uses_nccl(dist.get_backend()) else torch.device("cpu")
        value = torch.tensor([float(score)], dtype=torch.float64, device=on)
        dist.broadcast(value, src=0)
        score = value.item()
    net = _unwrapped(model)
    net, restructured, complete = in_turn(run, lambda: _gpa().pai_tracker.add_validation_score(score, net))
    return net.to(run.device), bool(restructured), bool(complete)


def after_restructure(run: Run, net, model, optimizer, build_optimizer: Callable[[Any], T], *,
                      in_place: bool | None = None) -> tuple[Any, T]:
    """What to do on `restructured` (after add_validation_score returned the new `net`), in one call.

    DDP in restart mode (the default, and under plain torchrun): end the generation (end_generation: exit 0), for the
    launcher to start the next with --pai_load_folder. DDP with --restructure in-process (or `in_place=True`), and
    DataParallel or one process always: go on in this process; returns (the new wrapper, build_optimizer(net)), the
    old wrapper's reducer and the old optimizer's state freed, every rank checked to hold rank 0's model.
    `build_optimizer(net)` is the script's own call, e.g. GPA.pai_tracker.setup_optimizer(net, opt_args, sched_args),
    returning what the script needs (optimizer, scheduler)."""
    if run.distributed and not (in_process.chosen() if in_place is None else in_place):
        end_generation(run)
    if not run.distributed:
        in_process.release(model, optimizer)
        return wrap_ddp(run, net), build_optimizer(net)
    return in_process.rewrap(run, net, model, optimizer, build_optimizer, wrap_ddp)


def mark_complete(run: Run, save, why: str = "complete") -> None:
    """Rank 0 writes SAVE/.training_complete (the launcher's sign that training is done), atomically."""
    if run.rank != 0:
        return
    save = os.fspath(save)
    os.makedirs(save, exist_ok=True)
    write_atomically(Path(save, MARKER), (why + "\n").encode(), durable=True)


def end_generation(run: Run) -> NoReturn:
    """Exit 0 once every rank is done with PerforatedAI's files (barrier, destroy_process_group under DDP)."""
    if run.distributed:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    sys.exit(0)
