#!/usr/bin/env python3
"""A job of N nodes on this machine: each node a real pai-launch with its agent on its own loopback address
(127.0.0.<i+1>), --nproc 1, and a trainer that follows PerforatedAI's protocol without torch work
(tests/fake_trainer.py), so the figures measure pai-launch and torch elastic, not training.

Per N it runs the job three times and prints one row:
- rendezvous: from the last node's end of a generation to every node's workers training in the next (mean, max);
- store requests/s: TCP data segments node 0's store received per second (every request that waits for its answer
  is one; writes sent back to back without an answer may share one), read from the kernel's socket counters (ss),
  while every node trains (the last worker's start -> the first one's end of training), at the generation's end
  (from there to the first node's decision) and during the rendezvous between generations; the bytes it received
  per second while training; and the most connections it had at once;
- CPU load: the CPU time of every process of the job over wall time and the machine's cores (1.0: saturated);
- RSS per node: pai-launch's own and its agent's (largest seen);
- SIGTERM: one node's pai-launch gets SIGTERM mid-generation -> every node has exited;
- kill -9: one node's pai-launch is SIGKILLed mid-generation -> every other node's workers are gone;
- same decisions: whether every node logged the same generation ends (number and kind) in the full run;
- left: processes of the job still there after all.

--packed puts every node on one address (127.0.0.1), as several nodes of a job on one host.

Usage: .venv/bin/python -m scripts.bench_scale [--nodes 2,4,8,16] [--generations 3] [--train-seconds 6] [--packed]
       [--no-stops] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
#: Every job folder this harness made: what _sweep may kill.
ROOTS: list[Path] = []
#: In the environment of every process a job started (inherited): how what it left is found, whatever its command.
MARK = "PAI_SCALE_JOB"


@dataclass
class Row:
    nodes: int
    exit_codes: list[int] = field(default_factory=list)
    rendezvous_mean_s: float = float("nan")
    rendezvous_max_s: float = float("nan")
    store_requests_training_per_s: float = float("nan")
    store_requests_end_per_s: float = float("nan")
    store_requests_rendezvous_per_s: float = float("nan")
    store_connections: int = 0
    store_bytes_in_training_per_s: float = float("nan")
    store_backend: str = ""
    cpu_load: float = float("nan")
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

    def __init__(self, nodes: int, generations: int, root: Path, *, hold: bool, train_seconds: float = 0.5,
                 packed: bool = False) -> None:
        self.nodes, self.root = nodes, root
        ROOTS.append(root)
        self.work, self.io = root / "work", root / "io"
        self.work.mkdir()
        self.io.mkdir()
        self.hold_file = self.io / "release"
        self.port = port = free_port()
        self.ready = self.io / "ready"
        self.ready.mkdir()
        trainer = ["--generations", str(generations), "--train-seconds", str(train_seconds), "--ready-dir",
                   str(self.ready)]
        if hold:
            trainer += ["--hold-until", str(self.hold_file)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT / "supervisor"), str(ROOT))), MARK: str(root)}
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
        left = [p for p in psutil.process_iter() if _job_of(p) == str(self.root)]
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


def _job_of(process: psutil.Process) -> str | None:
    try:
        return process.environ().get(MARK)
    except psutil.Error:
        return None


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


class Sampler(threading.Thread):
    """RSS of every node's pai-launch and agent, and what node 0's store received, over time."""

    def __init__(self, job: Job) -> None:
        super().__init__(daemon=True)
        self.job, self.stop = job, threading.Event()
        self.supervisor_rss = self.agent_rss = 0
        self.received = StoreTraffic(job.port)
        #: (time.time(), requests so far, bytes so far), one per look.
        self.series: list[tuple[float, int, int]] = []

    def run(self) -> None:
        while not self.stop.wait(0.2):
            self.series.append((time.time(), *self.received.look()))
            for rank in range(self.job.nodes):
                for process in self.job.tree(rank):
                    try:
                        rss = process.memory_info().rss
                        if process.pid == self.job.procs[rank].pid:
                            self.supervisor_rss = max(self.supervisor_rss, rss)
                        elif "pai_launch.agent.main" in _cmdline(process):
                            self.agent_rss = max(self.agent_rss, rss)
                    except psutil.Error:
                        continue

    def rate(self, start: float, end: float, column: int = 1) -> float | None:
        """Requests (column 1) or bytes (2) per second between two wall times, from the looks around them."""
        inside = [look for look in self.series if start <= look[0] <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return (inside[-1][column] - inside[0][column]) / (inside[-1][0] - inside[0][0])


class StoreTraffic:
    """What the store listening on `port` received, from the kernel's counters of its connections (`ss -ti`): a
    connection's counts summed once it is gone, and again from zero when its address is reused."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._seen: dict[str, tuple[int, int, int, int]] = {}  # peer -> (segments, bytes) before, (segments, bytes) now
        #: The most connections it had at once.
        self.most = 0

    def look(self) -> tuple[int, int]:
        out = subprocess.run(["ss", "-tinHO", "state", "established", f"( sport = :{self.port} )"],
                             capture_output=True, text=True, check=False).stdout
        self.most = max(self.most, len(out.splitlines()))
        for line in out.splitlines():
            fields = line.split()
            counters = dict(f.split(":", 1) for f in fields if f.startswith(("data_segs_in:", "bytes_received:")))
            if len(fields) < 4 or len(counters) < 2:
                continue
            segs, read = int(counters["data_segs_in"]), int(counters["bytes_received"])
            base_segs, base_bytes, last_segs, last_bytes = self._seen.get(fields[3], (0, 0, 0, 0))
            if segs < last_segs:  # a new connection from the same address and port
                base_segs, base_bytes = base_segs + last_segs, base_bytes + last_bytes
            self._seen[fields[3]] = (base_segs, base_bytes, segs, read)
        return (sum(v[0] + v[2] for v in self._seen.values()), sum(v[1] + v[3] for v in self._seen.values()))


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


def windows(job: Job, train_seconds: float) -> dict[str, list[tuple[float, float]]]:
    """Wall-time windows per generation: "train", every node's worker training (the last one's start -> the first
    one's start + the training time); "end", from there to the first node's decision (the workers' exits, the
    outcomes exchanged); "rdzv", the last node's decision -> the last worker of the next generation started."""
    ends: dict[int, list[float]] = {}
    for rank in range(job.nodes):
        for event in job.events(rank, "generation_ended"):
            ends.setdefault(event["generation"], []).append(stamp(event))
    starts = {g: [t for t, _ in found] for g, found in job.started().items() if len(found) == job.nodes}
    spans: dict[str, list[tuple[float, float]]] = {"train": [], "end": [], "rdzv": []}
    for g, times in starts.items():
        trained = min(times) + train_seconds
        if trained > max(times):
            spans["train"].append((max(times), trained))
        if g in ends and min(ends[g]) > trained:
            spans["end"].append((trained, min(ends[g])))
        if g - 1 in ends and max(times) > max(ends[g - 1]):
            spans["rdzv"].append((max(ends[g - 1]), max(times)))
    return spans


def _mean_rate(sampler: Sampler, spans: list[tuple[float, float]], column: int = 1) -> float:
    rates = [r for r in (sampler.rate(a, b, column) for a, b in spans) if r is not None]
    return statistics.fmean(rates) if rates else float("nan")


def full_run(nodes: int, generations: int, row: Row, *, train_seconds: float, packed: bool) -> None:
    with tempfile.TemporaryDirectory(prefix=f"pai-scale-{nodes}-") as folder:
        cpu_before, wall_before = _children_cpu(), time.monotonic()
        job = Job(nodes, generations, Path(folder), hold=False, train_seconds=train_seconds, packed=packed)
        sampler = Sampler(job)
        sampler.start()
        row.exit_codes = job.wait()
        sampler.stop.set()
        sampler.join()
        row.cpu_load = (_children_cpu() - cpu_before) / (time.monotonic() - wall_before) / (os.cpu_count() or 1)
        gaps = rendezvous_gaps(job)
        row.rendezvous_mean_s = statistics.fmean(gaps) if gaps else float("nan")
        row.rendezvous_max_s = max(gaps) if gaps else float("nan")
        spans = windows(job, train_seconds)
        row.store_requests_training_per_s = _mean_rate(sampler, spans["train"])
        row.store_requests_end_per_s = _mean_rate(sampler, spans["end"])
        row.store_requests_rendezvous_per_s = _mean_rate(sampler, spans["rdzv"])
        row.store_bytes_in_training_per_s = _mean_rate(sampler, spans["train"], column=2)
        row.store_connections = sampler.received.most
        row.store_backend = next((e.get("store_backend") or "" for e in job.events(0, "job_nodes")), "")
        row.supervisor_rss_mb = sampler.supervisor_rss / 2**20
        row.agent_rss_mb = sampler.agent_rss / 2**20
        first = decisions(job, 0)
        row.same_decisions = len(first) == generations and all(decisions(job, r) == first for r in range(nodes))
        row.left += job.close()


def _children_cpu() -> float:
    """CPU seconds of every process this harness started and reaped, with what they reaped in turn."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stop_run(nodes: int, row: Row, *, kill: bool, packed: bool) -> None:
    """The last node's pai-launch gets SIGTERM (or SIGKILL) once every node's worker of generation 1 runs; the kill
    is timed until every worker of the job (the other nodes' too) is gone."""
    with tempfile.TemporaryDirectory(prefix=f"pai-scale-{nodes}-stop-") as folder:
        job = Job(nodes, 3, Path(folder), hold=True, packed=packed)
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


def measure(nodes: int, generations: int, *, train_seconds: float, packed: bool, stops: bool) -> Row:
    row = Row(nodes)
    full_run(nodes, generations, row, train_seconds=train_seconds, packed=packed)
    if stops:
        stop_run(nodes, row, kill=False, packed=packed)
        stop_run(nodes, row, kill=True, packed=packed)
    return row


def _sweep() -> None:
    """The harness itself failed: whatever its jobs started goes too (never an orphan); another harness's jobs stay."""
    roots = {str(root) for root in ROOTS}
    for process in psutil.process_iter():
        if _job_of(process) in roots:
            try:
                process.kill()
            except psutil.Error:
                pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="2,4,8,16", help="comma-separated node counts (default: 2,4,8,16)")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--train-seconds", type=float, default=6.0, help="each generation's training (default: 6)")
    parser.add_argument("--packed", action="store_true", help="every node on one address, as nodes sharing a host")
    parser.add_argument("--no-stops", action="store_true", help="the full run only (no SIGTERM and kill -9 runs)")
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # a timeout's kill still sweeps
    rows = []
    print(f"{'nodes':>5} {'exit':>6} {'rdzv mean/max, s':>17} {'store req/s train/end/rdzv':>26} {'KB/s':>6} "
          f"{'conns':>5} {'CPU load':>8} {'RSS sup/agent, MB':>18} {'SIGTERM, s':>10} {'kill -9, s':>10} {'same':>5} "
          f"{'left':>4}", flush=True)
    for nodes in (int(n) for n in options.nodes.split(",")):
        try:
            row = measure(nodes, options.generations, train_seconds=options.train_seconds, packed=options.packed,
                          stops=not options.no_stops)
        except BaseException:
            _sweep()
            raise
        rows.append(row)
        codes = "0" if set(row.exit_codes) == {0} else ",".join(map(str, sorted(set(row.exit_codes))))
        print(f"{nodes:>5} {codes:>6} {row.rendezvous_mean_s:>8.2f}/{row.rendezvous_max_s:<8.2f} "
              f"{row.store_requests_training_per_s:>10.0f}/{row.store_requests_end_per_s:<6.0f}/"
              f"{row.store_requests_rendezvous_per_s:<8.0f} {row.store_bytes_in_training_per_s / 1024:>6.1f} "
              f"{row.store_connections:>5} {row.cpu_load:>8.2f} "
              f"{row.supervisor_rss_mb:>8.0f}/{row.agent_rss_mb:<9.0f} "
              f"{row.sigterm_all_exited_s:>10.2f} {row.kill9_workers_gone_s:>10.2f} {row.same_decisions!s:>5} "
              f"{row.left:>4}", flush=True)
    print(f"store server: {rows[0].store_backend or 'unknown'}; addresses: "
          f"{'one for every node (packed)' if options.packed else '127.0.0.<node+1>'}", flush=True)
    if options.json:
        options.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    good = all(set(r.exit_codes) == {0} and r.same_decisions and r.left == 0 and
               (options.no_stops or (r.sigterm_exit_codes and r.kill9_workers_gone_s < 300)) for r in rows)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
