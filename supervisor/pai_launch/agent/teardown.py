"""The run's grace on torch's own stop of a generation's workers, on every torch from 2.4 on.

`LaunchConfig.shutdown_timeout` (torch 2.13 on) reaches only the stop of a run that torch ends itself (a signal, the
end of `run()`). Wherever a call gives no timeout, torch stops a failed generation's surviving ranks with a fixed 30 s:

- `PContext._poll` calls `close()` with its default (cold workers' SubprocessContext stops the survivors there);
- `_stop_workers` calls `_shutdown()` with its default 30 s, which it hands on to close (a `_shutdown` that takes no
  timeout, before 2.13, hands on none: close's default covers it);
- warm workers' MultiprocessContext._poll joins torch.multiprocessing's ProcessContext, which SIGTERMs the others as
  soon as one fails and SIGKILLs them 30 s later (a constant before 2.7; its grace_period would wait before the
  SIGTERM too).

`apply(grace)` makes the grace the default timeout of the first two and stops a failed warm rank's survivors itself,
SIGTERM then SIGKILL after the grace, before torch's join gets to them; a timeout torch passes explicitly is kept.
It patches the classes, so it runs in the agent process only (agent.generation, before torch starts the workers).

The same patches note which workers torch began stopping (`stopped_by_torch`): a SIGTERM that ended one of them is
torch's doing, whenever its exit happened to be seen (under load a collateral exit can be seen before the real one).

Where pai-launch has already sent the workers their stop signal (a stop of the run, the job stopped on another node),
the first one to exit looks like a failure to torch, which would SIGTERM the others in the middle of their own stop (a
checkpoint written in a handler, cut short). Then both stops only wait for the workers, up to the grace, and SIGKILL
those left: every worker gets one stop signal.
"""

from __future__ import annotations

import functools
import inspect
import signal
import subprocess
import threading
import time
from collections.abc import Callable

_grace = [30.0]
_patch_lock = threading.Lock()
#: pids of this generation's workers that were still running when torch (or stop_survivors) began to stop them.
_stopping: set[int] = set()
#: Whether pai-launch has already sent this generation's workers their stop signal (apply sets it).
_signalled: list[Callable[[], bool]] = [lambda: False]


def grace_targets(pcontext: type, agent: type) -> tuple[tuple[type, str], ...]:
    """The (class, method) pairs whose missing timeout must read as the grace: PContext.close always; the agent's
    _shutdown where it takes a timeout (an older one passes none on to close, which close's default covers)."""
    targets: tuple[tuple[type, str], ...] = ((pcontext, "close"),)
    if "timeout" in inspect.signature(agent._shutdown).parameters:
        targets += ((agent, "_shutdown"),)
    return targets


def with_timeout(signature: inspect.Signature, args: tuple, kwargs: dict, timeout) -> dict:
    """`kwargs` with timeout=`timeout` added when the call (self first in `args`) gives none, by position or name;
    unchanged for a call that does not fit the signature (torch's own error then says so)."""
    try:
        given = signature.bind(*args, **kwargs).arguments
    except TypeError:
        return kwargs
    if "timeout" in given:
        return kwargs
    return {**kwargs, "timeout": timeout}


def first_failure(exitcodes: dict[int, int | None]) -> int | None:
    """The local rank torch's join blames (the lowest that has exited, not with 0), or None while none has failed."""
    failed = [rank for rank, code in exitcodes.items() if code is not None and code != 0]
    return min(failed) if failed else None


def _marked(function) -> bool:
    return getattr(function, "_pai_launch_grace", False)


def running_workers(context) -> set[int]:
    """pids of the workers of torch's PContext `context` that had not ended by torch's last look (cold workers'
    Popen return code, warm workers' multiprocessing exit code): those its close is about to stop."""
    handlers = getattr(context, "subprocess_handlers", None) or {}
    pids = {handler.proc.pid for handler in handlers.values() if handler.proc.returncode is None}
    processes = getattr(getattr(context, "_pc", None), "processes", None) or ()
    pids.update(process.pid for process in processes if process.pid is not None and process.exitcode is None)
    return pids


def stopped_by_torch(pid: int) -> bool:
    """Whether torch's stop of this generation's workers found worker `pid` still running."""
    return pid in _stopping


def default_timeout(cls: type, name: str, before=None) -> None:
    """Wrap `cls.name` so that a call without a timeout gets the grace (read at each call), after `before(self)`
    where given; once per method."""
    original = getattr(cls, name)
    if _marked(original):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapped(*args, **kwargs):
        if before is not None and args:
            before(args[0])
        return original(*args, **with_timeout(signature, args, kwargs, _grace[0]))

    wrapped._pai_launch_grace = True  # type: ignore[attr-defined]
    setattr(cls, name, wrapped)


def stop_survivors(context, grace: float) -> None:
    """Once a process of torch.multiprocessing's ProcessContext `context` has failed: SIGTERM the others, SIGKILL
    those left after `grace`, and leave torch's join only the failed one to find (so it blames that rank, and finds
    nobody left to stop)."""
    pending = {index: context.processes[index] for index in context.sentinels.values()}
    failed = first_failure({index: process.exitcode for index, process in pending.items()})
    if failed is None:
        return
    alive = [process for process in context.processes if process.is_alive()]
    _stopping.update(process.pid for process in alive)
    if not _signalled[0]():  # else they have their stop signal already: a second would cut their stop short
        for process in alive:
            process.terminate()
    deadline = time.monotonic() + grace
    for process in alive:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in alive:
        if process.is_alive():
            process.kill()
            process.join(grace)  # bounded: one stuck in the kernel must not wedge the agent
    context.sentinels = {context.processes[failed].sentinel: failed}


def _survivors_first(cls: type) -> None:
    """Wrap `cls._poll` (MultiprocessContext's) to stop a failed rank's survivors with the grace before it joins."""
    original = cls._poll
    if _marked(original):
        return

    @functools.wraps(original)
    def _poll(self):
        context = getattr(self, "_pc", None)
        if context is not None and hasattr(context, "sentinels") and hasattr(context, "processes"):
            stop_survivors(context, _grace[0])
        return original(self)

    _poll._pai_launch_grace = True  # type: ignore[attr-defined]
    cls._poll = _poll


def _note_stopping(context) -> None:
    _stopping.update(running_workers(context))


def wait_for_workers(context, seconds: float) -> None:
    """Wait up to `seconds` in all for the workers of torch's PContext `context` to end (cold: Popen, warm:
    multiprocessing processes)."""
    deadline = time.monotonic() + seconds
    for handler in (getattr(context, "subprocess_handlers", None) or {}).values():
        try:
            handler.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return
    for process in getattr(getattr(context, "_pc", None), "processes", None) or ():
        process.join(max(0.0, deadline - time.monotonic()))


def _once_signalled(cls: type) -> None:
    """Wrap `cls.close` (PContext's, already given the grace): where pai-launch has signalled the workers, wait for
    them up to the call's timeout, then close with SIGKILL (for those left) instead of a second stop signal."""
    original = cls.close
    if getattr(original, "_pai_launch_once", False):
        return
    signature = inspect.signature(original)  # torch's own, through functools.wraps

    @functools.wraps(original)
    def close(*args, **kwargs):
        if not args or not _signalled[0]():
            return original(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)  # torch's own error says what is wrong
        wait_for_workers(args[0], float(bound.arguments.get("timeout", _grace[0])))
        bound.arguments["death_sig"] = signal.SIGKILL
        return original(*bound.args, **bound.kwargs)

    close._pai_launch_once = True  # type: ignore[attr-defined]
    cls.close = close


def apply(grace: float, signalled: Callable[[], bool] = lambda: False) -> None:
    """Make `grace` what torch gives a stopping worker wherever it passes no timeout, in this process; later calls
    only change the value. Called as each generation starts: the workers noted as stopped are the last one's.
    `signalled()`: whether pai-launch has sent this generation's workers their stop signal already."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.elastic.multiprocessing import api

    _grace[0], _signalled[0] = grace, signalled
    _stopping.clear()
    with _patch_lock:
        for cls, name in grace_targets(api.PContext, LocalElasticAgent):
            default_timeout(cls, name, before=_note_stopping if cls is api.PContext else None)
        _once_signalled(api.PContext)
        _survivors_first(api.MultiprocessContext)
