"""The agent process: the only part of pai-launch that imports torch.

It starts, imports torch's elastic launcher (so it is warm before it is needed), then waits for one
GenerationRequest on its request pipe, runs that generation through `elastic_launch` (c10d
rendezvous on a free local port, max_restarts=0: pai-launch owns the restart policy), writes one
GenerationResult to its result pipe and leaves at once, without waiting for torch's teardown.

Run as: python -m pai_launch.agent --request-fd R --result-fd W --parent-pid P
"""

from __future__ import annotations

import argparse
import glob
import os
import signal
import sys
import threading
import time
import traceback

import psutil

from pai_launch import agent_store, nodeagent, procs
from pai_launch.crossnode import stopped_by_launcher
from pai_launch.protocol import GenerationRequest, GenerationResult, StopJob, WorkerFailure, joined_line
from pai_launch.relay import LogRelay
from pai_launch.workers import WorkerExit, WorkerWatch

#: Delivered by the kernel when pai-launch dies (even by SIGKILL): take every worker down with us.
PARENT_DIED_SIGNAL = signal.SIGRTMIN + 3
_LOG_TAIL_LINES = 20


_dying = False


def _on_parent_death(signum, frame) -> None:  # pragma: no cover - exercised by the kill -9 tests
    # Every thread inherits the parent-death setting, so the kernel sends this signal once per thread: a nested
    # call would interrupt the sweep below after the workers died and before their orphans were killed.
    global _dying
    if _dying:
        return
    _dying = True
    for proc in psutil.Process().children(recursive=True):
        try:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.kill()
        except (psutil.Error, OSError):
            pass
    os._exit(128 + signal.SIGKILL)


def _ignore(signum, frame) -> None:
    """SIGUSR1/2 are meant for the workers; a handler (not SIG_IGN, which exec would pass on) keeps us alive."""


def _arm_parent_watch(parent_pid: int) -> None:
    signal.signal(PARENT_DIED_SIGNAL, _on_parent_death)
    procs.set_parent_death_signal(PARENT_DIED_SIGNAL)
    if os.getppid() != parent_pid:
        _on_parent_death(PARENT_DIED_SIGNAL, None)


def _log_tail(log_dir: str, local_rank: int) -> str:
    """The last lines of a rank's stderr (falling back to stdout) from torch's per-rank log files."""
    for stream in ("stderr.log", "stdout.log"):
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
                return "\n".join(lines[-_LOG_TAIL_LINES:])
    return ""


def failures_from_exits(exits: list[WorkerExit], log_dir: str) -> tuple[WorkerFailure, ...]:
    """Non-zero exits, root cause first: the earliest exit, a real code before torch's collateral stops."""
    failed = sorted((e for e in exits if e.returncode != 0), key=lambda e: (e.at, stopped_by_launcher(e.returncode), e.rank))
    offset = time.time() - time.monotonic()  # seen-at as wall-clock time, comparable across nodes
    return tuple(WorkerFailure(e.rank, e.returncode, e.pid, _log_tail(log_dir, e.rank if e.local_rank is None else e.local_rank),
                               at=e.at + offset) for e in failed)


class _Reporter:
    """Writes the one result and leaves at once, whoever gets there first: the worker watch or torch."""

    def __init__(self, result_fd: int, relay: LogRelay) -> None:
        self._fd = result_fd
        self._relay = relay
        self._lock = threading.Lock()

    def joined(self, generation: int, failures: int) -> None:
        os.write(self._fd, joined_line(generation, failures))

    def report(self, result: GenerationResult) -> None:
        with self._lock:
            self._relay.stop()
            os.write(self._fd, result.to_line())
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)  # torch's remaining teardown (exit barrier, store shutdown) has nothing left to do for us


class _RankLabels:
    """The prefix of a worker's relayed lines: `[rank3]`, and in a multi-node job `[rank3 node1]` (global rank: torch
    numbers ranks node by node, so it is the group's first rank plus the local rank)."""

    def __init__(self, request: GenerationRequest) -> None:
        self.nproc = request.nproc
        self.node = None if request.nodes is None else request.nodes.node_rank
        self.watch: WorkerWatch | None = None

    def __call__(self, local_rank: int) -> str:
        if self.node is None:
            return f"[rank{local_rank}]"
        group = self.watch.group if self.watch is not None else None
        rank = f"rank{group[0] * self.nproc + local_rank}" if group is not None else f"local rank {local_rank}"
        return f"[{rank} node{self.node}]"


def run_generation(request: GenerationRequest, result_fd: int) -> None:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    os.environ.update(request.env)
    labels = _RankLabels(request)
    reporter = _Reporter(result_fd, LogRelay(request.log_dir, label=labels).start())
    generation, node = request.generation, None
    if request.nodes is not None:
        entered = nodeagent.enter(request, reporter.joined)
        if isinstance(entered, GenerationResult):
            reporter.report(entered)
        link, generation = entered
        node = nodeagent.NodeGeneration(request, link, generation)
        config = nodeagent.launch_config(request, generation)
    else:
        config = LaunchConfig(
            min_nodes=1,
            max_nodes=1,
            nproc_per_node=request.nproc,
            run_id=request.elastic_run_id,
            rdzv_backend="c10d",
            rdzv_endpoint="localhost:0",
            max_restarts=0,
            monitor_interval=0.1,
            logs_specs=DefaultLogsSpecs(log_dir=request.log_dir, redirects=Std.ALL, tee=Std.NONE),
            shutdown_timeout=max(1, int(request.grace)),
        )
    entrypoint_args = procs.dies_with_parent((request.python, *request.args), python=request.python)[1:]
    concluding = threading.Lock()

    def conclude(failures: tuple[WorkerFailure, ...], error: str | None = None) -> None:
        """Once, whoever gets here first: this node's result (combined with the others' in a multi-node job)."""
        with concluding:
            if node is None:
                reporter.report(GenerationResult(generation, failures=failures, error=error, log_dir=request.log_dir))
            reporter.report(node.finish(failures, error))

    def all_exited(exits: list[WorkerExit]) -> None:
        conclude(failures_from_exits(exits, request.log_dir))

    watch = WorkerWatch(request.nproc, all_exited)
    labels.watch = watch
    if node is not None:
        node.abort = lambda: conclude((), None)
        node.start_monitor(watch)
    try:
        elastic_launch(config, request.python)(*entrypoint_args)
        failures, error = (), None
    except ChildFailedError as exc:
        def order(item):
            rank, f = item
            return (f.timestamp, watch.exit_time(f.pid), stopped_by_launcher(f.exitcode), rank)

        failures = tuple(
            WorkerFailure(int(rank), int(f.exitcode), int(f.pid), _log_tail(request.log_dir, f.local_rank), at=float(f.timestamp))
            for rank, f in sorted(exc.failures.items(), key=order)
        )
        error = None
    except Exception as exc:  # rendezvous errors and the like: report them, the supervisor decides
        failures, error = (), traceback.format_exception_only(exc)[-1].strip()
    watch.stop()
    conclude(failures, error)


def _listen_for_stop(fd: int) -> None:
    """After its request, the supervisor may send StopJob: raise the job's stop flag in node 0's store."""
    line = _read_line(fd)
    if line:
        send_stop(line)


def send_stop(line: bytes) -> None:
    import json

    data = json.loads(line).get("stop")
    if not data:
        return
    stop = StopJob(**data)
    nodeagent.STOP_RECEIVED.append((stop.signum, stop.reason))
    try:
        agent_store.raise_stop_flag(stop)
    except Exception:  # noqa: BLE001 - the store may be gone already: nothing left to tell
        pass


def _read_line(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pai_launch.agent")
    parser.add_argument("--request-fd", type=int, required=True)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    options = parser.parse_args(argv)
    _arm_parent_watch(options.parent_pid)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        os.environ.pop(name, None)  # torch gives each worker its own; a worker is a child that has RANK
    for signum in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, _ignore)
    # torch's C++ warnings (a peer's store connection closing, with a stack trace) are noise in the agent; the
    # workers, which inherit our environment, keep whatever level the user set.
    user_level = os.environ.get("TORCH_CPP_LOG_LEVEL")
    os.environ["TORCH_CPP_LOG_LEVEL"] = user_level or "ERROR"
    import torch.distributed.launcher.api  # noqa: F401  - warm up before the request arrives

    if user_level is None:
        os.environ.pop("TORCH_CPP_LOG_LEVEL")

    line = _read_line(options.request_fd)
    if not line:
        os._exit(0)
    if line.startswith(b'{"stop"'):  # a standby agent used to tell the job this node is stopping
        send_stop(line)
        os._exit(0)
    threading.Thread(target=_listen_for_stop, args=(options.request_fd,), name="stop-listener", daemon=True).start()
    run_generation(GenerationRequest.from_line(line), options.result_fd)


if __name__ == "__main__":
    main()
