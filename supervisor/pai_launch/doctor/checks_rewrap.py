"""A hand-written restructure in process: DDP built again under `if restructured:` instead of leaving the generation.

That works under DDP on three conditions (pai_launch.training.after_restructure keeps them): every rank scores rank 0
first (all at once, a rank reads best_model.pt before rank 0 rewrote it and its model ends with another dendrite
count), the new DDP broadcasts no buffers (broadcast_buffers=False; torch's forward_sync_buffers=False still syncs them
when DDP is built, and PerforatedAI's tracker buffer has another length on each rank), and a new optimizer for the new
parameters. A script that re-wraps is not told to exit (restructure-no-exit); it is told which condition it misses.

Each check takes the walked Flow and returns Findings; none has side effects.
"""

from __future__ import annotations

from pai_launch.doctor import names
from pai_launch.doctor.checks_loop import flag_ifs
from pai_launch.doctor.checks_setup import in_ddp
from pai_launch.doctor.flow import Event, Flow
from pai_launch.doctor.model import ERROR, Finding


def rewraps(flow: Flow) -> list[Event]:
    """The DistributedDataParallel calls made under `if restructured:` (a re-wrap in the running ranks)."""
    restructure, _complete = flag_ifs(flow)
    return [e for e in flow.calls(names.is_ddp) if in_ddp(e) and any(e.under(node) for node, _first in restructure)]


def _builds_optimizer(name: str | None) -> bool:
    return names.is_tracker(name, "setup_optimizer") or names.is_torch_optimizer(name)


def check_rewrap(flow: Flow) -> list[Finding]:
    if not flow.is_ddp():
        return []
    found = []
    for event in rewraps(flow)[:1]:
        guard = next(g.node for g in event.guards if g.positive and event.under(g.node))
        under = [e for e in flow.calls(bool) if e.under(guard)]
        if not any(_builds_optimizer(e.name) for e in under):
            found.append(Finding("rewrap-no-optimizer", ERROR, event.line,
                                 "DDP is built again after a restructure but the optimizer is not: it still holds "
                                 "the old model's parameters, so the new dendrites never train",
                                 "after the re-wrap, optimizer, scheduler = GPA.pai_tracker.setup_optimizer(net, "
                                 "...), or use pai_launch.training.after_restructure", path=event.path))
        scores = flow.calls(lambda n: names.is_tracker(n, "add_validation_score"))
        if any(in_ddp(e) and e.mode.rank0 is not True and not flow.taken_in_turn(e) for e in scores):
            found.append(Finding("rewrap-scores-at-once", ERROR, event.line,
                                 "DDP is built again after a restructure while every rank called add_validation_score "
                                 "at once: a rank can read best_model.pt before rank 0 rewrote it and go on with "
                                 "another model (a different dendrite count)",
                                 "score one rank at a time, rank 0 first (pai_launch.training.add_validation_score)",
                                 path=event.path))
    return found


def check_forward_sync_buffers(flow: Flow) -> list[Finding]:
    """forward_sync_buffers=False in place of broadcast_buffers=False: DDP still syncs buffers when it is built."""
    for event in flow.calls(names.is_ddp):
        keywords = {k.arg for k in event.node.keywords}
        if "forward_sync_buffers" in keywords and "broadcast_buffers" not in keywords:
            return [Finding("ddp-forward-sync-buffers", ERROR, event.line,
                            "DistributedDataParallel gets forward_sync_buffers but not broadcast_buffers=False: it "
                            "still syncs buffers when it is built, and PerforatedAI's tracker buffer has another "
                            "length on each rank (a size mismatch, at the first wrap or at a re-wrap)",
                            "pass broadcast_buffers=False (torch's deprecation warning about it can be ignored)",
                            path=event.path)]
    return []


CHECKS = (check_rewrap, check_forward_sync_buffers)
