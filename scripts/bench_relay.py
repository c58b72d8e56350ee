#!/usr/bin/env python3
"""Benchmark the agent's log relay on ranks that print as fast as they can.

N writer processes (one per rank) each write MB megabytes of lines into a torch-style per-rank log file
(ROOT/<run>/attempt_0/<rank>/stdout.log), and one relaying process tails the files to /dev/null, twice:

- backlog: the writers first, as fast as they can, then the relaying process on everything they wrote (for the
  relay: nothing skipped however far behind): what a relaying process can do at most;
- live: the writers at --rate MB/s each while the relaying process runs (the relay with its own limits, so it may
  skip to keep up, and says how much): what a run that floods its output sees.

The relaying process is, in turn:

- `relay`: pai-launch's relay (supervisor/pai_launch/agent/relay.py), bounded chunks, one replace per chunk;
- `per-line`: the whole backlog read at once and each line prefixed on its own (a relay's simplest form);
- `copy`: the bytes copied unchanged in 1 MiB reads, no labels (what any relay costs at least).

Per relaying process it prints the megabytes written and relayed (skipped: left out to keep up, with a note), the
seconds from its start until it had relayed everything written, the throughput (relayed MB / s), its peak RSS and,
live, how long it took to finish after the writers did. Goals (backlog): the relay at least 100 MB/s in all, under
200 MB peak RSS.

Usage: .venv/bin/python -m scripts.bench_relay [--ranks 4] [--mb 100] [--rate 25] [--only relay] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KINDS = ("relay", "per-line", "copy")
GOAL_MB_S, GOAL_RSS_MB = 100.0, 200.0

_WRITER = """
import os, sys
import time
path, rank, total, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
line = f"rank {rank} step loss 0.123456 lr 0.001 {'x' * 60}\\n".encode()
block = line * (65536 // len(line))
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
written, started = 0, time.monotonic()
while written < total:
    written += os.write(fd, block[: total - written])
    ahead = written / rate - (time.monotonic() - started) if rate else 0
    if ahead > 0:
        time.sleep(ahead)
os.write(fd, f"rank {rank} last line\\n".encode())
"""


class _Counting:
    """A sink that counts what it is given and sends it to /dev/null."""

    def __init__(self) -> None:
        self.fd = os.open(os.devnull, os.O_WRONLY)
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.bytes += len(data)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        return len(data)

    def flush(self) -> None:
        pass


def _rank_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/attempt_*/*/stdout.log"))


def _relay_pai(root: Path, done: Path, sink: _Counting, bounded: bool) -> dict:
    from pai_launch.agent.relay import Limits, LogRelay

    limits = Limits() if bounded else Limits(max_lag=1 << 62)
    relay = LogRelay(str(root), sinks={"stdout": sink, "stderr": sink}, limits=limits).start()
    while not done.exists():
        time.sleep(0.02)
    finished = time.monotonic()
    relay.stop(within=600)  # here: relay everything written, however long it takes
    skipped = relay.skipped.values()
    return {"skipped_bytes": sum(b for b, _ in skipped), "skipped_lines": sum(n for _, n in skipped),
            "after_writers_s": time.monotonic() - finished}


def _relay_per_line(root: Path, done: Path, sink: _Counting, bounded: bool) -> dict:
    from pai_launch.agent.relay import prefixed

    offsets: dict[Path, int] = {}
    finished_at = None
    while True:
        finished = done.exists()
        finished_at = finished_at or (time.monotonic() if finished else None)
        for path in _rank_files(root):
            with open(path, "rb") as handle:
                handle.seek(offsets.get(path, 0))
                data = handle.read()
            offsets[path] = offsets.get(path, 0) + len(data)
            head = f"[rank{path.parent.name}]: ".encode()
            lines = data.split(b"\n")
            lines.pop()  # the writers end every line
            sink.write(b"".join(prefixed(head, line) + b"\n" for line in lines))
        if finished:
            return {"skipped_bytes": 0, "skipped_lines": 0, "after_writers_s": time.monotonic() - finished_at}
        time.sleep(0.05)


def _relay_copy(root: Path, done: Path, sink: _Counting, bounded: bool) -> dict:
    offsets: dict[Path, int] = {}
    finished_at = None
    while True:
        finished, moved = done.exists(), False
        finished_at = finished_at or (time.monotonic() if finished else None)
        for path in _rank_files(root):
            with open(path, "rb") as handle:
                handle.seek(offsets.get(path, 0))
                while data := handle.read(1 << 20):
                    offsets[path] = offsets.get(path, 0) + len(data)
                    sink.write(data)
                    moved = True
        if finished and not moved:
            return {"skipped_bytes": 0, "skipped_lines": 0, "after_writers_s": time.monotonic() - finished_at}
        if not moved:
            time.sleep(0.05)


def relaying_process(kind: str, root: Path, done: Path, bounded: bool) -> None:
    """The child: relay until the writers are done and everything is relayed; print one JSON line."""
    import pai_launch.agent.relay  # noqa: F401  (imported before the clock starts)

    sink = _Counting()
    started = time.monotonic()
    result = {"relay": _relay_pai, "per-line": _relay_per_line, "copy": _relay_copy}[kind](root, done, sink, bounded)
    seconds = time.monotonic() - started
    relayed_in = sum(path.stat().st_size for path in _rank_files(root)) - result["skipped_bytes"]
    print(json.dumps({**result, "seconds": seconds, "relayed_bytes": relayed_in, "sink_bytes": sink.bytes,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def _writers(paths: list[Path], total: int, rate: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(rank), str(total), str(rate)])
            for rank, path in enumerate(paths)]


def measure(kind: str, ranks: int, megabytes: float, live: bool, rate: float) -> dict:
    """One relaying process against `ranks` writers of `megabytes` each: after them (backlog) or beside them (live)."""
    total = int(megabytes * 1e6)
    with tempfile.TemporaryDirectory(prefix="bench-relay-") as tmp:
        root, done = Path(tmp) / "logs", Path(tmp) / "writers-done"
        paths = [root / "run_x" / "attempt_0" / str(rank) / "stdout.log" for rank in range(ranks)]
        for path in paths:
            path.parent.mkdir(parents=True)
            path.touch()
        writers = [] if live else _writers(paths, total, 0)
        codes = [writer.wait() for writer in writers]
        relayer = subprocess.Popen([sys.executable, "-m", "scripts.bench_relay", "--relaying", kind, str(root),
                                    str(done),
                                    "bounded" if live else "unbounded"], stdout=subprocess.PIPE, text=True)
        if live:
            writers = _writers(paths, total, rate * 1e6)
            codes = [writer.wait() for writer in writers]
        done.touch()
        out, _ = relayer.communicate(timeout=600)
        if relayer.returncode != 0 or any(codes):
            raise SystemExit(f"bench_relay: the {kind} relaying process exited {relayer.returncode}, writers {codes}")
        result = json.loads(out.strip().splitlines()[-1])
        written = sum(path.stat().st_size for path in paths)
    return {"kind": kind, "mode": "live" if live else "backlog", "ranks": ranks, "written_mb": written / 1e6,
            "relayed_mb": result["relayed_bytes"] / 1e6, "skipped_mb": result["skipped_bytes"] / 1e6,
            "skipped_lines": result["skipped_lines"], "seconds": result["seconds"],
            "after_writers_s": result["after_writers_s"],
            "mb_s": result["relayed_bytes"] / 1e6 / max(result["seconds"], 1e-9), "peak_rss_mb": result["peak_rss_mb"]}


def table(rows: list[dict]) -> str:
    header = f"{'relaying process':<16} {'mode':<8} {'ranks':>5} {'written MB':>10} {'relayed MB':>10} " \
             f"{'skipped MB':>10} {'seconds':>8} {'MB/s':>8} {'peak RSS MB':>11} {'after writers s':>15}"
    lines = [header, "-" * len(header)]
    for row in rows:
        lines.append(f"{row['kind']:<16} {row['mode']:<8} {row['ranks']:>5} {row['written_mb']:>10.1f} "
                     f"{row['relayed_mb']:>10.1f} {row['skipped_mb']:>10.1f} {row['seconds']:>8.2f} "
                     f"{row['mb_s']:>8.1f} "
                     f"{row['peak_rss_mb']:>11.1f} {row['after_writers_s']:>15.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--mb", type=float, default=100.0, help="megabytes each rank writes")
    parser.add_argument("--rate", type=float, default=25.0, help="live: megabytes per second each rank writes")
    parser.add_argument("--only", choices=KINDS, action="append", help="measure only this relaying process")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--relaying", nargs=4, metavar=("KIND", "ROOT", "DONE", "LIMITS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.relaying:
        kind, root, done, limits = args.relaying
        relaying_process(kind, Path(root), Path(done), limits == "bounded")
        return 0
    rows = [measure(kind, args.ranks, args.mb, live, args.rate) for live in (False, True)
            for kind in (args.only or KINDS)]
    print(table(rows))
    for row in rows:
        if row["kind"] == "relay" and row["mode"] == "backlog":
            print(f"goals: relay >= {GOAL_MB_S:g} MB/s ({row['mb_s']:.0f}), peak RSS < {GOAL_RSS_MB:g} MB "
                  f"({row['peak_rss_mb']:.0f})")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
