"""The agent process: the only part of pai-launch that imports torch.

It starts, imports torch's elastic launcher (so it is warm before it is needed), then waits for one
GenerationRequest on its request pipe, runs that generation through `elastic_launch` (c10d
rendezvous on a free local port, max_restarts=0: pai-launch owns the restart policy), writes one
GenerationResult to its result pipe and leaves at once, without waiting for torch's teardown.

Run as: python -m supervisor.agent --request-fd R --result-fd W --parent-pid P
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

from supervisor import procs
from supervisor.protocol import GenerationRequest, GenerationResult, WorkerFailure

#: Delivered by the kernel when pai-launch dies (even by SIGKILL): take every worker down with us.
PARENT_DIED_SIGNAL = signal.SIGRTMIN + 3
_LOG_TAIL_LINES = 20


def _on_parent_death(signum, frame) -> None:  # pragma: no cover - exercised by the kill -9 tests
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


class _ExitClock:
    """When each worker exited, seen with waitid(WNOWAIT) so torch's Popen still reaps it and gets its status.

    torch stamps failures in whole seconds: the rank that crashed and the ranks torch then stopped usually
    share a stamp, and a stopped rank may exit 143 from its own SIGTERM handler. The exit order tells them apart.
    """

    def __init__(self) -> None:
        self.exited: dict[int, float] = {}
        self._watched: set[int] = set()
        self._done = threading.Event()
        threading.Thread(target=self._discover, name="exit-clock", daemon=True).start()

    def _discover(self) -> None:
        me = psutil.Process()
        while not self._done.wait(0.02):
            try:
                children = me.children()
            except psutil.Error:
                continue
            for child in children:
                if child.pid not in self._watched:
                    self._watched.add(child.pid)
                    threading.Thread(target=self._await_exit, args=(child.pid,), daemon=True).start()

    def _await_exit(self, pid: int) -> None:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:  # already reaped by torch: no time for it
            return
        self.exited.setdefault(pid, time.monotonic())

    def stop(self) -> None:
        self._done.set()


def _root_cause_order(item, exited: dict[int, float] | None = None) -> tuple:
    """Earliest failure first: by torch's stamp, then by exit time; among equals, a real exit code before the
    SIGTERM/SIGKILL torch sent the rest."""
    rank, failure = item
    collateral = failure.exitcode in (-signal.SIGTERM, -signal.SIGKILL)
    return (failure.timestamp, (exited or {}).get(failure.pid, float("inf")), collateral, rank)


def run_generation(request: GenerationRequest) -> GenerationResult:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    os.environ.update(request.env)
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=request.nproc,
        run_id=request.elastic_run_id,
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=0.1,
        logs_specs=DefaultLogsSpecs(log_dir=request.log_dir, redirects=Std.ALL, tee=Std.ALL),
        log_line_prefix_template="[rank${rank}]: ",
        shutdown_timeout=max(1, int(request.grace)),
    )
    entrypoint_args = procs.dies_with_parent((request.python, *request.args), python=request.python)[1:]
    clock = _ExitClock()
    try:
        elastic_launch(config, request.python)(*entrypoint_args)
    except ChildFailedError as exc:
        failures = tuple(
            WorkerFailure(rank=int(rank), returncode=int(f.exitcode), pid=int(f.pid), log_tail=_log_tail(request.log_dir, f.local_rank))
            for rank, f in sorted(exc.failures.items(), key=lambda item: _root_cause_order(item, clock.exited))
        )
        return GenerationResult(request.generation, failures=failures, log_dir=request.log_dir)
    except Exception as exc:  # rendezvous errors and the like: report them, the supervisor decides
        detail = traceback.format_exception_only(exc)[-1].strip()
        return GenerationResult(request.generation, error=detail, log_dir=request.log_dir)
    finally:
        clock.stop()
    return GenerationResult(request.generation, log_dir=request.log_dir)


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
    parser = argparse.ArgumentParser(prog="python -m supervisor.agent")
    parser.add_argument("--request-fd", type=int, required=True)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    options = parser.parse_args(argv)
    _arm_parent_watch(options.parent_pid)
    for signum in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, _ignore)
    import torch.distributed.launcher.api  # noqa: F401  - warm up before the request arrives

    line = _read_line(options.request_fd)
    if not line:
        os._exit(0)
    result = run_generation(GenerationRequest.from_line(line))
    os.write(options.result_fd, result.to_line())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
