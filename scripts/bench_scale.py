#!/usr/bin/env python3
"""A job of N nodes on this machine: each node a real pai-launch with its agent on its own loopback address
(127.0.0.<i+1>), --nproc 1, and a trainer that follows PerforatedAI's protocol without torch work
(tests/fake_trainer.py), so the figures measure pai-launch and torch elastic, not training.

Per N it runs the job three times and prints one row:
- rendezvous: from the last node's end of a generation to every node's workers training in the next (mean, max);
- store reads/s: read syscalls of node 0's store process per second while a generation runs (an upper bound of the
  store operations it serves: every request is at least one read);
- RSS per node: pai-launch's own and its agent's (largest seen);
- SIGTERM: one node's pai-launch gets SIGTERM mid-generation -> every node has exited;
- kill -9: one node's pai-launch is SIGKILLed mid-generation -> every other node's workers are gone;
- same decisions: whether every node logged the same generation ends (number and kind) in the full run;
- left: processes of the job still there after all.

Usage: .venv/bin/python -m scripts.bench_scale [--nodes 2,4,8,16] [--generations 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
TRAINER = ROOT / "tests" / "fake_trainer.py"
RUN_TIMEOUT = 600


@dataclass
class Row:
    nodes: int
    exit_codes: list[int] = field(default_factory=list)
    rendezvous_mean_s: float = float("nan")
    rendezvous_max_s: float = float("nan")
    store_reads_per_s: float = float("nan")
    supervisor_rss_mb: float = 0.0
    agent_rss_mb: float = 0.0
    sigterm_all_exited_s: float = float("nan")
    sigterm_exit_codes: list[int] = field(default_factory=list)
    kill9_workers_gone_s: float = float("nan")
    same_decisions: bool = False
    left: int = 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stamp(event: dict) -> float:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


class Job:
    """N pai-launch processes of one job, their output in files, in a folder of their own."""

    def __init__(self, nodes: int, generations: int, root: Path, *, hold: bool) -> None:
        self.nodes, self.root = nodes, root
        self.work, self.io = root / "work", root / "io"
        self.work.mkdir()
        self.io.mkdir()
        self.hold_file = self.io / "release"
        port = free_port()
        self.ready = self.io / "ready"
        self.ready.mkdir()
        trainer = ["--generations", str(generations), "--train-seconds", "0.5", "--ready-dir", str(self.ready)]
        if hold:
            trainer += ["--hold-until", str(self.hold_file)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.procs = []
        for rank in range(nodes):
            argv = [sys.executable, "-m", "pai_launch", "--log-format", "json", "--nnodes", str(nodes), "--node-rank",
                    str(rank), "--rdzv-endpoint", f"127.0.0.1:{port}", "--local-addr", f"127.0.0.{rank + 1}",
                    "--rdzv-timeout", "300", "--nproc", "1", str(TRAINER), *trainer]
            with open(self.io / f"node{rank}.out", "wb") as out, open(self.io / f"node{rank}.err", "wb") as err:
                self.procs.append(subprocess.Popen(argv, cwd=self.work, env=env, stdout=out, stderr=err,
                                                   stdin=subprocess.DEVNULL, start_new_session=True))

    def events(self, rank: int, name: str | None = None) -> list[dict]:
        found = []
        for line in (self.io / f"node{rank}.err").read_text(errors="replace").splitlines():
            if line.startswith("{") and '"event"' in line:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if name is None or event["event"] == name:
                    found.append(event)
        return found

    def tree(self, rank: int) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.procs[rank].pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def started(self) -> dict[int, list[tuple[float, int]]]:
        """Per generation, each worker's (start time, pid), from the trainer's ready files (<gen>-<rank>.<pid>)."""
        found: dict[int, list[tuple[float, int]]] = {}
        for path in self.ready.iterdir():
            generation, pid = path.name.partition("-")[0], path.name.rsplit(".", 1)[-1]
            try:
                found.setdefault(int(generation), []).append((path.stat().st_mtime, int(pid)))
            except (ValueError, OSError):
                continue
        return found

    def workers_alive(self) -> list[int]:
        return [pid for started in self.started().values() for _, pid in started if _alive(pid)]

    def wait(self, timeout: float = RUN_TIMEOUT) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(-999)
        return codes

    def running(self, generation: int) -> bool:
        return len(self.started().get(generation, [])) >= self.nodes

    def close(self) -> int:
        """Every pai-launch of the job stopped (SIGTERM, then its exit waited for); the processes left behind that
        mention the job's folder (orphans), counted and killed."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        time.sleep(1.0)  # what a pai-launch left would still be there; what it ended is reaped by now
        left = [p for p in psutil.process_iter() if str(self.root) in _cmdline(p) and p.pid != os.getpid()]
        for process in left:
            try:
                process.kill()
            except psutil.Error:
                pass
        return len(left)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


class Sampler(threading.Thread):
    """RSS of every node's pai-launch and agent, and node 0's store process's read syscalls over time."""

    def __init__(self, job: Job) -> None:
        super().__init__(daemon=True)
        self.job, self.stop = job, threading.Event()
        self.supervisor_rss = self.agent_rss = 0
        self.store_reads: list[tuple[float, int]] = []

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for rank in range(self.job.nodes):
                for process in self.job.tree(rank):
                    command = _cmdline(process)
                    try:
                        rss = process.memory_info().rss
                        if process.pid == self.job.procs[rank].pid:
                            self.supervisor_rss = max(self.supervisor_rss, rss)
                        elif "pai_launch.agent.main" in command:
                            self.agent_rss = max(self.agent_rss, rss)
                        elif rank == 0 and "pai_launch.store.server" in command and " serve " in command:
                            self.store_reads.append((time.monotonic(), process.io_counters().read_count))
                    except psutil.Error:
                        continue


def rendezvous_gaps(job: Job) -> list[float]:
    """Per generation after the first: the last node's end of the one before -> every node's worker running in it."""
    ends: dict[int, list[float]] = {}
    for rank in range(job.nodes):
        for event in job.events(rank, "generation_ended"):
            ends.setdefault(event["generation"], []).append(stamp(event))
    started = job.started()
    return [max(t for t, _ in started[g]) - max(ends[g - 1]) for g in sorted(started)
            if g - 1 in ends and len(started[g]) == job.nodes and len(ends[g - 1]) == job.nodes]


def decisions(job: Job, rank: int) -> list[tuple]:
    names = ("generation_ended", "generation_failed", "generation_stopped")
    return [(e["generation"], e["event"], e.get("complete")) for e in job.events(rank) if e["event"] in names]


def full_run(nodes: int, generations: int, row: Row) -> None:
    with tempfile.TemporaryDirectory(prefix=f"pai-scale-{nodes}-") as folder:
        job = Job(nodes, generations, Path(folder), hold=False)
        sampler = Sampler(job)
        sampler.start()
        row.exit_codes = job.wait()
        sampler.stop.set()
        sampler.join()
        gaps = rendezvous_gaps(job)
        row.rendezvous_mean_s = statistics.fmean(gaps) if gaps else float("nan")
        row.rendezvous_max_s = max(gaps) if gaps else float("nan")
        reads = sampler.store_reads
        if len(reads) >= 2 and reads[-1][0] > reads[0][0]:
            row.store_reads_per_s = (reads[-1][1] - reads[0][1]) / (reads[-1][0] - reads[0][0])
        row.supervisor_rss_mb = sampler.supervisor_rss / 2**20
        row.agent_rss_mb = sampler.agent_rss / 2**20
        first = decisions(job, 0)
        row.same_decisions = len(first) == generations and all(decisions(job, r) == first for r in range(nodes))
        row.left += job.close()


def stop_run(nodes: int, row: Row, *, kill: bool) -> None:
    """The last node's pai-launch gets SIGTERM (or SIGKILL) once every node's worker of generation 1 runs; the kill
    is timed until every worker of the job (the other nodes' too) is gone."""
    with tempfile.TemporaryDirectory(prefix=f"pai-scale-{nodes}-stop-") as folder:
        job = Job(nodes, 3, Path(folder), hold=True)
        deadline = time.monotonic() + RUN_TIMEOUT
        while not job.running(1) and time.monotonic() < deadline and all(p.poll() is None for p in job.procs):
            time.sleep(0.05)
        victim = nodes - 1
        sent = time.monotonic()
        os.kill(job.procs[victim].pid, signal.SIGKILL if kill else signal.SIGTERM)
        if kill:
            while job.workers_alive() and time.monotonic() < sent + 300:
                time.sleep(0.02)
            row.kill9_workers_gone_s = time.monotonic() - sent
        else:
            while any(p.poll() is None for p in job.procs) and time.monotonic() < sent + 300:
                time.sleep(0.02)
            row.sigterm_all_exited_s = time.monotonic() - sent
            row.sigterm_exit_codes = [p.returncode for p in job.procs]
        job.hold_file.touch()
        row.left += job.close()


def measure(nodes: int, generations: int) -> Row:
    row = Row(nodes)
    full_run(nodes, generations, row)
    stop_run(nodes, row, kill=False)
    stop_run(nodes, row, kill=True)
    return row


def _sweep(prefix: str = "pai-scale-") -> None:
    """The harness itself failed: whatever its jobs started goes too (never an orphan)."""
    for process in psutil.process_iter():
        if prefix in _cmdline(process) and process.pid != os.getpid():
            try:
                process.kill()
            except psutil.Error:
                pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2,4,8,16", help="comma-separated node counts (default: 2,4,8,16)")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    rows = []
    print(f"{'nodes':>5} {'exit':>6} {'rdzv mean/max, s':>17} {'store reads/s':>13} {'RSS sup/agent, MB':>18} "
          f"{'SIGTERM, s':>10} {'kill -9, s':>10} {'same':>5} {'left':>4}", flush=True)
    for nodes in (int(n) for n in options.nodes.split(",")):
        try:
            row = measure(nodes, options.generations)
        except BaseException:
            _sweep()
            raise
        rows.append(row)
        codes = "0" if set(row.exit_codes) == {0} else ",".join(map(str, sorted(set(row.exit_codes))))
        print(f"{nodes:>5} {codes:>6} {row.rendezvous_mean_s:>8.2f}/{row.rendezvous_max_s:<8.2f} "
              f"{row.store_reads_per_s:>13.0f} {row.supervisor_rss_mb:>8.0f}/{row.agent_rss_mb:<9.0f} "
              f"{row.sigterm_all_exited_s:>10.2f} {row.kill9_workers_gone_s:>10.2f} {str(row.same_decisions):>5} "
              f"{row.left:>4}", flush=True)
    if options.json:
        options.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    good = all(set(r.exit_codes) == {0} and r.same_decisions and r.left == 0 for r in rows)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
