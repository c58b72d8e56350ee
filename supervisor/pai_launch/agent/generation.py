"""One generation in the agent: torch elastic's `elastic_launch`, with cold or warm workers, and its one result.

Cold workers are fresh interpreters (`python -u SCRIPT ARGS`, torch's binary entrypoint). Warm workers are forks of
the agent's forkserver (torch's function entrypoint with the forkserver start method) that run the script through
forkserver.worker_main. Either way c10d rendezvous on a fresh id, max_restarts=0 (pai-launch owns the restart policy),
and the generation's variables (agent.workerenv) are in the agent's environment only while torch's launcher runs.

The result goes out as soon as every worker has exited (the watch), or when torch returns, whichever is first; the
agent then waits for torch to finish before it takes the next generation. If torch has not returned ABANDON_AFTER
seconds after the result (a worker that left by os._exit(0), which torch never counts as done; a rendezvous or exit
barrier waiting for a node that is gone), the agent interrupts it; if it is still not back RETIRE_AFTER seconds
later, the agent retires: it says so and exits, and the supervisor starts a new one.
"""

from __future__ import annotations

import glob
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pai_launch.agent import exitbarrier, launchconfig, multinode, nodeentry, teardown, torchcompat, workerenv
from pai_launch.agent.control import Abandoned, AgentControl
from pai_launch.agent.rankheads import RankHeads
from pai_launch.agent.relay import LogRelay
from pai_launch.agent.workers import WorkerExit, WorkerWatch
from pai_launch.linux import procs
from pai_launch.wire import failure_causes
from pai_launch.wire.crossnode import stopped_by_launcher
from pai_launch.wire.protocol import GenerationRequest, GenerationResult, WorkerFailure

_LOG_TAIL_LINES = 20
ABANDON_AFTER = 1.0
RETIRE_AFTER = 10.0
#: Set (to anything) in pai-launch's own tests: the worker watch sees no worker, as when torch reaps each one before
#: the watch looks, so torch's return alone ends the generation.
BLIND_WATCH_TEST_ENV = "PAI_LAUNCH_TEST_BLIND_WATCH"
#: Seconds, in pai-launch's own tests: torch's launcher returns this much later than its workers ended (as when it
#: waits on a barrier or a store of the ended round), a fault hook rather than a slow machine.
LAUNCHER_LATE_TEST_ENV = "PAI_LAUNCH_TEST_LAUNCHER_LATE"
#: "RANK:SECONDS", in pai-launch's own tests: the worker watch sees that global rank's exit this much later than it
#: happened (as when its thread waits for a busy CPU), a fault hook rather than a slow machine.
WATCH_LATE_TEST_ENV = "PAI_LAUNCH_TEST_WATCH_LATE"
#: Sent by the agent to its own main thread to interrupt a torch launcher that will not return.
ABANDON_SIGNAL = signal.SIGRTMIN + 4


def _stream_lines(log_dir: str, local_rank: int, stream: str) -> list[str]:
    """The last lines (16 KiB at most) of a rank's newest non-empty log file for `stream` (stderr.log, stdout.log)."""
    paths = sorted(glob.glob(os.path.join(log_dir, "**", "attempt_*", str(local_rank), stream), recursive=True))
    for path in reversed(paths):
        try:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 16384))
                lines = handle.read().decode(errors="replace").splitlines()
        except OSError:
            continue
        if any(line.strip() for line in lines):
            return lines
    return []


def _log_tail(log_dir: str, local_rank: int) -> str:
    """The last lines of a rank's stderr (falling back to stdout), after the stdout lines that explain a failure its
    stderr only shows the end of (PerforatedAI prints its complaint to stdout, then stops in pdb)."""
    stderr = _stream_lines(log_dir, local_rank, "stderr.log")
    stdout = _stream_lines(log_dir, local_rank, "stdout.log")
    if not stderr:
        return "\n".join(failure_causes.compact(stdout)[-_LOG_TAIL_LINES:])
    told = failure_causes.telling_stdout(stdout[-64:])
    return "\n".join(told + failure_causes.compact(stderr)[-_LOG_TAIL_LINES:])


def collateral(pid: int, returncode: int) -> bool:
    """The worker died of the stop torch's launcher sent it because another rank had failed: the evidence is that the
    launcher found it running when it began to stop the workers, not the order in which the exits were seen."""
    return stopped_by_launcher(returncode) and teardown.stopped_by_torch(pid)


def failures_from_exits(exits: list[WorkerExit], log_dir: str) -> tuple[WorkerFailure, ...]:
    """Non-zero exits, root cause first: the earliest exit, a real code before torch's collateral stops."""
    offset = time.time() - time.monotonic()  # seen-at as wall-clock time, comparable across nodes
    failures = [WorkerFailure(e.rank, e.returncode, e.pid, _log_tail(log_dir, e.rank if e.local_rank is None
                                                                     else e.local_rank),
                              at=e.at + offset, collateral=collateral(e.pid, e.returncode))
                for e in exits if e.returncode != 0]
    return root_cause_first(failures)


def root_cause_first(failures: list[WorkerFailure]) -> tuple[WorkerFailure, ...]:
    """A rank the launcher stopped, then a rank whose log says a peer went away, come after the others; then the
    earliest exit, a real code before a launcher's stop, the lower rank."""
    return tuple(sorted(failures, key=lambda f: (f.collateral, failure_causes.lost_a_peer(f.log_tail), f.at,
                                                 stopped_by_launcher(f.returncode), f.rank)))


def failures_from_torch(failed: dict, watch: WorkerWatch, log_dir: str) -> tuple[WorkerFailure, ...]:
    """torch's failures (rank -> ProcessFailure), root cause first. torch stamps them in whole seconds, when it
    noticed; the watch saw each exit to the millisecond, so its times decide the order where it has them."""
    offset = time.time() - time.monotonic()

    def seen_at(failure) -> float:
        at = watch.exit_time(failure.pid)
        return float(failure.timestamp) if at is None else at + offset

    return root_cause_first([WorkerFailure(int(rank), int(f.exitcode), int(f.pid), _log_tail(log_dir, f.local_rank),
                                           at=seen_at(f), collateral=collateral(int(f.pid), int(f.exitcode)))
                             for rank, f in failed.items()])


class _Conclusion:
    """The generation's one result, whoever gets there first: the worker watch, a peer's verdict or torch. It goes out
    after the relay's last lines, whose final drain is bounded (relay.Limits.final_drain): however much the ranks
    printed, the result is never late enough for finished workers to be taken for lingering ones."""

    def __init__(self, out, relay: LogRelay) -> None:
        self._out, self._relay = out, relay
        self._lock = threading.Lock()
        self.sent = threading.Event()

    def send(self, make) -> None:
        with self._lock:
            if self.sent.is_set():
                return
            self._relay.stop()
            self._out.result(make())
            self.sent.set()


@dataclass(frozen=True)
class _Launch:
    """What torch's launcher runs: the generation's number (a multi-node job's store may hand out a later one than the
    request's), this node's part in a multi-node job, and torch's LaunchConfig."""

    generation: int
    node: multinode.NodeGeneration | None
    config: Any


def run_generation(request: GenerationRequest, out, control: AgentControl, pool=None) -> None:
    """Run one generation and send its result through `out` (agent.Output); `control` is what the request reader
    heard meanwhile; `pool` (warmpool.WarmPool) for warm workers."""
    if control.cancelled(request.generation):  # the run stopped while the request was on its way: no worker starts
        out.result(GenerationResult(request.generation, log_dir=request.log_dir, cancelled=True))
        return
    if request.no_python:
        pool = None  # a program that is not Python cannot be a fork of the preloaded interpreter
    heads = RankHeads(request)
    conclusion = _Conclusion(out, LogRelay(request.log_dir, head=heads, muted=request.muted).start())
    launch = _prepare(request, out.joined, control, warm=pool is not None)
    if isinstance(launch, GenerationResult):
        conclusion.send(lambda: launch)
        return
    conclude = _concluder(request, conclusion, launch, pool)
    if control.cancelled(request.generation):  # the last moment before torch starts workers
        conclusion.send(lambda: GenerationResult(launch.generation, log_dir=request.log_dir, cancelled=True))
        return
    watch = _start_watch(request, launch, conclude, heads, pool)
    returned = threading.Event()
    threading.Thread(target=_bound_torch, args=(conclusion, returned, out), name="torch-bound", daemon=True).start()
    env = workerenv.changes(request, launch.generation, warm=pool is not None,
                            signals=torchcompat.signals_to_handle(launch.config))
    # torch's own stops of the workers get the grace too, and none once pai-launch has signalled them
    teardown.apply(launchconfig.grace_s(request), signalled=_signalled_by_pai_launch(control, request, launch))
    exitbarrier.apply()  # a node whose workers succeeded must not wait in torch for a peer whose workers failed
    with workerenv.applied(env):
        failures, error = _run_torch(launch.config, *_entrypoint(request, pool), watch, control, request.log_dir)
    watch.stop()
    conclude(failures, error, ran=error is None)  # torch returns normally only once its workers ran and exited
    returned.set()


def _signalled_by_pai_launch(control: AgentControl, request: GenerationRequest, launch: _Launch) -> Callable[[], bool]:
    """Whether the generation's workers have had their stop signal from pai-launch: this node's supervisor stopping
    the run (it cancels the generation, then signals them) or the job, or this agent stopping them for something
    elsewhere (multinode.NodeGeneration)."""
    def signalled() -> bool:
        return (control.cancelled(request.generation) or control.stopping is not None
                or (launch.node is not None and launch.node.we_stopped))

    return signalled


def _prepare(request: GenerationRequest, joined, control: AgentControl, *, warm: bool) -> _Launch | GenerationResult:
    """The generation's LaunchConfig; in a multi-node job first this node's place in the generation, or the
    GenerationResult that says why it has none (`joined`: agent.Output.joined)."""
    start_method = "forkserver" if warm else "spawn"
    if request.nodes is None:
        return _Launch(request.generation, None, launchconfig.single_node(request, start_method))
    entered = nodeentry.enter(request, joined)
    if isinstance(entered, GenerationResult):
        return entered
    link, generation = entered
    return _Launch(generation, multinode.NodeGeneration(request, link, generation, control),
                   launchconfig.multi_node(request, generation, start_method))


def _concluder(request: GenerationRequest, conclusion: _Conclusion, launch: _Launch, pool) -> Callable[..., None]:
    """`conclude(failures, error)`: whoever sees the workers' end first sends this node's result (combined with the
    others' in a multi-node job); a forkserver that died is named as the cause of its workers' exits."""

    def conclude(failures: tuple[WorkerFailure, ...], error: str | None = None, *, ran: bool = False) -> None:
        fault = forkserver_fault(pool, launch.generation) if failures or error else None
        if launch.node is None:
            conclusion.send(lambda: GenerationResult(launch.generation, failures=failures, error=error,
                                                     log_dir=request.log_dir, fault=fault))
        else:
            conclusion.send(lambda: replace(launch.node.finish(failures, error, ran=ran), fault=fault))

    return conclude


def _records(request: GenerationRequest) -> str:
    """Where warm workers write their ranks and exits (forkserver.worker_main.Record)."""
    return os.path.join(request.log_dir, "workers")


def _start_watch(request: GenerationRequest, launch: _Launch, conclude, heads: RankHeads, pool) -> WorkerWatch:
    """The watch that concludes once every worker has exited; in a multi-node job, the peers' monitor beside it."""
    sources = {} if pool is None else {"parent": pool.server_pid, "records": _records(request), "exits": pool.exits}
    watch = WorkerWatch(request.nproc, lambda exits: conclude(failures_from_exits(exits, request.log_dir)),
                        blind=bool(os.environ.get(BLIND_WATCH_TEST_ENV)), late=_watch_late(), **sources)
    heads.watch = watch
    if launch.node is not None:
        launch.node.abort = lambda: conclude((), None)
        launch.node.start_monitor(watch)
    return watch


def _watch_late() -> tuple[int, float] | None:
    """The WATCH_LATE_TEST_ENV fault hook's (rank, seconds); None where it is unset."""
    rank, _, seconds = os.environ.get(WATCH_LATE_TEST_ENV, "").partition(":")
    return (int(rank), float(seconds)) if rank.isdigit() and seconds else None


def _entrypoint(request: GenerationRequest, pool) -> tuple[Any, tuple]:
    """torch's entrypoint and its arguments: `python ARGS` (or the program in ARGS) for cold workers,
    forkserver.worker_main for warm ones (their spec copies the agent's environment: ask for it while the generation's
    is applied)."""
    if pool is None:
        argv = request.args if request.no_python else (request.python, *request.args)
        return request.python, tuple(procs.dies_with_parent(argv, python=request.python)[1:])
    from pai_launch.forkserver import worker_main

    return worker_main.run_script, (pool.worker_spec(request, _records(request)),)


def _run_torch(config, entrypoint, args: tuple, watch: WorkerWatch, control: AgentControl,
               log_dir: str) -> tuple[tuple[WorkerFailure, ...], str | None]:
    """torch's launcher, run to its end: (the failed workers, root cause first; a launcher error)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    control.in_torch.set()
    try:
        try:
            elastic_launch(config, entrypoint)(*args)
            failed = None
        except ChildFailedError as exc:
            failed = exc.failures
        _late(LAUNCHER_LATE_TEST_ENV)
        return ((), None) if failed is None else (failures_from_torch(failed, watch, log_dir), None)
    except Abandoned:
        return (), "torch's launcher did not return after the generation ended"
    except Exception as exc:  # rendezvous errors and the like: report them, the supervisor decides
        return (), traceback.format_exception_only(exc)[-1].strip()
    finally:
        control.in_torch.clear()


def _late(variable: str) -> None:
    """A test's fault hook: wait the seconds `variable` gives (nothing where it is unset)."""
    seconds = float(os.environ.get(variable) or 0)
    if seconds > 0:
        time.sleep(seconds)


def forkserver_fault(pool, generation: int) -> str | None:
    """Why the generation's warm workers died, when it is their forkserver's death (their exits, 255 or a signal,
    are only its consequence); None while the server lives or there is none (cold workers)."""
    if pool is None or not pool.server_pid or procs.is_running(pool.server_pid):
        return None
    return (f"the warm workers' forkserver (pid {pool.server_pid}) died during generation {generation}, and its "
            f"workers with it; the agent starts a new one for the next generation")


def _bound_torch(conclusion: _Conclusion, returned: threading.Event, out) -> None:
    """Once the result is out, torch gets ABANDON_AFTER seconds to return, then an interruption, then RETIRE_AFTER."""
    while not conclusion.sent.wait(0.5):
        if returned.is_set():
            return
    if returned.wait(ABANDON_AFTER):
        return
    main = threading.main_thread().ident
    if main is not None:
        signal.pthread_kill(main, ABANDON_SIGNAL)
    if returned.wait(RETIRE_AFTER):
        return
    out.retiring("torch's launcher did not return after the generation ended")
    os._exit(0)
