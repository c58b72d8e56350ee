#!/usr/bin/env python3
"""Benchmark pai-launch against the reference bash loop + torchrun, side by side, in one run.

Every tool trains examples/train_pai_ddp.py (init -> restructures -> complete) with the same number of processes,
interleaved A B C C B A (repeated --rounds times) so machine noise hits all alike. Timestamps come from the example's
own `PAI_EXAMPLE {...}` lines. Two suites:

--suite restart (the default): the bash loop, pai-launch --cold (every worker a fresh interpreter) and pai-launch
(warm workers forked from the agent's preloaded forkserver). Per tool, with its ratio to the bash loop:
- total wall time of a whole run;
- launcher gap: rank 0's exit of one phase (init run or generation) to the moment the next generation's rank-0 worker
  process exists (its first statement);
- full restart gap: the same exit to that worker's first optimizer step;
- the launcher's own CPU seconds and peak RSS (bash for the loop, the pai-launch process itself), plus the CPU of the
  launcher's helper processes (torchrun agents / pai-launch agents);
- `--help` start-up time.
Targets: warm full restart gap <= 0.3x the bash loop's and whole run <= 0.6x; the launcher gap <= 0.5x; pai-launch's
own peak RSS < 80 MB; `pai-launch --help` < 0.5 s.

--suite in-process: the bash loop, pai-launch (warm restarts) and pai-launch --restructure in-process, each on the
example as it is and on a realistic variant whose every process first prepares its data for --prepare-seconds (3 by
default) of CPU work, as real scripts' data sets take. Per workload and tool: the restructure gap (rank 0's
add_validation_score returning with the switch file written -> the next optimizer step, in the next generation or in
the same process) and the whole run, with ratios to the bash loop. Targets on the realistic variant: in-process
restructure gap <= 0.05x the bash loop's, whole run <= 0.5x.

--suite multinode: two nodes on loopback, the failure-to-restart gap of pai-launch (warm and --cold) beside
torchrun --nnodes 2 --max-restarts 3, as a ratio from one run (scripts/bench_multinode.py).

Usage: .venv/bin/python scripts/bench.py [--suite restart|in-process|multinode] [--rounds 1] [--nproc 2] [--json
out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_pai_ddp.py"
REFERENCE = ROOT / "scripts" / "reference" / "train_distributed.sh"
BIN = Path(sys.executable).parent
LINE = re.compile(r"PAI_EXAMPLE (\{.*\})")
EXITS = {"init_exit", "restructure_exit", "complete_exit"}
TOOLS = ("bash loop", "pai-launch --cold", "pai-launch")
IN_PROCESS = "pai-launch --restructure in-process"
IN_PROCESS_TOOLS = ("bash loop", "pai-launch", IN_PROCESS)
WORKLOADS = ("example", "realistic")
FORKSERVER = "multiprocessing.forkserver"


@dataclass
class Sample:
    """What one run measured."""

    tool: str
    wall_s: float
    returncode: int
    workload: str = "example"
    #: add_validation_score returning with a switch file written -> the next optimizer step (either mode).
    restructure_gaps: list[float] = field(default_factory=list)
    launcher_gaps: list[float] = field(default_factory=list)
    restart_gaps: list[float] = field(default_factory=list)
    generations: int = 0
    own_cpu_s: float = 0.0
    own_peak_rss_mb: float = 0.0
    helper_cpu_s: float = 0.0


class ProcessSampler(threading.Thread):
    """Samples the launcher process and its non-worker descendants every 50 ms (a warm worker is a fork of the
    agent's forkserver: a child of it with the same command line)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.stop = threading.Event()
        self.own_cpu = 0.0
        self.own_hwm_kb = 0
        self.helper_cpu: dict[int, float] = {}
        self.workers: set[int] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                times = self.root.cpu_times()
                self.own_cpu = times.user + times.system
                self.own_hwm_kb = max(self.own_hwm_kb, _vm_hwm_kb(self.root.pid))
                children = self.root.children(recursive=True)
            except psutil.Error:
                return
            for child in children:
                if child.pid in self.workers:
                    continue
                try:
                    cmdline = " ".join(child.cmdline())
                    if not cmdline:
                        continue  # a zombie: it was counted (or not) while it ran
                    launcher = "torchrun" in cmdline or "pai_launch.agent.main" in cmdline
                    forked = FORKSERVER in cmdline and FORKSERVER in " ".join(child.parent().cmdline())
                    if ("train_pai_ddp.py" in cmdline and not launcher) or forked:
                        self.workers.add(child.pid)  # a training process, not the launcher
                        continue
                    times = child.cpu_times()
                    self.helper_cpu[child.pid] = times.user + times.system
                except psutil.Error:
                    continue
            self.stop.wait(0.05)


def _vm_hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def command_for(tool: str, nproc: int, script_args: tuple[str, ...] = ()) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if tool == "bash loop":
        env.update(SAVE_NAME="PAI", PYTHON_SCRIPT=str(EXAMPLE), NUM_GPUS=str(nproc),
                   TORCHRUN=str(BIN / "torchrun"), PYTHON=str(BIN / "python"))
        return ["bash", str(REFERENCE), *script_args], env
    flags = {"pai-launch --cold": ["--cold"], IN_PROCESS: ["--restructure", "in-process"]}.get(tool, [])
    return [str(BIN / "pai-launch"), "--nproc", str(nproc), "--log-format", "json", *flags, str(EXAMPLE),
            *script_args], env


def run_once(tool: str, nproc: int, workload: str = "example", prepare_seconds: float = 0.0) -> Sample:
    script_args = ("--prepare-seconds", str(prepare_seconds)) if workload == "realistic" else ()
    argv, env = command_for(tool, nproc, script_args)
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as workdir:
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, text=True)
        sampler = ProcessSampler(proc.pid)
        sampler.start()
        out, _ = proc.communicate()
        wall = time.monotonic() - started
        sampler.stop.set()
        sampler.join()
    events = [json.loads(match.group(1)) for match in map(LINE.search, out.splitlines()) if match]
    sample = Sample(tool, wall, proc.returncode, workload=workload, own_cpu_s=sampler.own_cpu,
                    own_peak_rss_mb=sampler.own_hwm_kb / 1024, helper_cpu_s=sum(sampler.helper_cpu.values()))
    rank0 = sorted((e for e in events if e.get("rank", 0) == 0), key=lambda e: e["t"])
    last_exit = None
    waiting_step = None
    switched = None
    for event in rank0:
        if event["event"] == "switched":
            switched = event["t"]
        elif event["event"] == "first_step" and switched is not None:
            sample.restructure_gaps.append(event["t"] - switched)
            switched = None
        if event["event"] in EXITS:
            last_exit = event["t"]
        elif event["event"] == "process_start" and last_exit is not None:
            sample.launcher_gaps.append(event["t"] - last_exit)
            sample.generations += 1
            waiting_step, last_exit = last_exit, None
        elif event["event"] == "first_step" and waiting_step is not None:
            sample.restart_gaps.append(event["t"] - waiting_step)
            waiting_step = None
    return sample


def help_time(argv: list[str], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        started = time.monotonic()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.monotonic() - started)
    return statistics.median(times)


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("restart", "in-process", "multinode"), default="restart",
                        help="restart: bash loop, --cold, warm; in-process: bash loop, warm, --restructure in-process; "
                             "multinode: two nodes' failure-to-restart gap beside torchrun's "
                             "(scripts/bench_multinode.py)")
    parser.add_argument("--rounds", type=int, default=1, help="A B B A rounds (each is 2 runs of each tool)")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--prepare-seconds", type=float, default=3.0,
                        help="in-process suite: the realistic variant's data preparation per process (default: 3)")
    parser.add_argument("--json", type=Path, default=None, help="also write every sample here")
    options = parser.parse_args()
    if options.suite == "multinode":
        sys.path.insert(0, str(ROOT / "scripts"))
        from bench_multinode import multinode_suite

        return multinode_suite(options)
    return in_process_suite(options) if options.suite == "in-process" else restart_suite(options)


def in_process_suite(options) -> int:
    """Bash loop, warm restarts and in-process restructures on the example and its realistic variant, ABBA."""
    order = [(workload, tool) for workload in WORKLOADS
             for tool in [*IN_PROCESS_TOOLS, *reversed(IN_PROCESS_TOOLS)] * options.rounds]
    samples: list[Sample] = []
    for index, (workload, tool) in enumerate(order, 1):
        sample = run_once(tool, options.nproc, workload, options.prepare_seconds)
        samples.append(sample)
        print(f"[{index}/{len(order)}] {workload:9s} {tool:35s} exit {sample.returncode}  wall {sample.wall_s:6.1f} s  "
              f"restructure gaps {[round(g, 2) for g in sample.restructure_gaps]}", flush=True)
    rows = {}
    for workload in WORKLOADS:
        for tool in IN_PROCESS_TOOLS:
            mine = [s for s in samples if (s.workload, s.tool) == (workload, tool)]
            rows[workload, tool] = {"workload": workload, "tool": tool, "runs": len(mine),
                                    "failed_runs": sum(s.returncode != 0 for s in mine),
                                    "wall_s": mean([s.wall_s for s in mine]),
                                    "restructure_gap_s": mean([g for s in mine for g in s.restructure_gaps]),
                                    "restructures": mean([len(s.restructure_gaps) for s in mine])}
    print()
    print(
        f"{'workload':11s}{'tool':37s}{'runs':>5s}{'restructure gap, s':>20s}{'ratio':>7s}"
        f"{'whole run, s':>14s}{'ratio':>7s}")
    for workload in WORKLOADS:
        ref = rows[workload, "bash loop"]
        for tool in IN_PROCESS_TOOLS:
            row = rows[workload, tool]
            gap_ratio = row["restructure_gap_s"] / ref["restructure_gap_s"]
            wall_ratio = row["wall_s"] / ref["wall_s"]
            print(f"{workload:11s}{tool:37s}{row['runs']:>5d}{row['restructure_gap_s']:>20.3f}{gap_ratio:>7.3f}"
                  f"{row['wall_s']:>14.1f}{wall_ratio:>7.2f}")
    print(f"(realistic: every process prepares its data for {options.prepare_seconds:g} s of CPU work first; "
          "restructure gap: add_validation_score returning with the switch file written -> the next optimizer step)")
    print()
    ref, mine = rows["realistic", "bash loop"], rows["realistic", IN_PROCESS]
    targets = [
        ("realistic: in-process restructure gap <= 0.05x the bash loop's",
         mine["restructure_gap_s"] <= 0.05 * ref["restructure_gap_s"]),
        ("realistic: in-process whole run <= 0.5x the bash loop's", mine["wall_s"] <= 0.5 * ref["wall_s"]),
        ("every run completed (exit 0) with the same number of restructures per workload",
         all(r["failed_runs"] == 0 for r in rows.values())
         and all(len({rows[w, t]["restructures"] for t in IN_PROCESS_TOOLS}) == 1 for w in WORKLOADS)),
    ]
    for text, met in targets:
        print(f"  [{'met' if met else 'MISSED'}] {text}")
    if options.json:
        options.json.write_text(json.dumps({"samples": [s.__dict__ for s in samples], "summary": list(rows.values())},
                                           indent=2))
    return 0 if all(met for _, met in targets) else 1


def restart_suite(options) -> int:
    """Bash loop, --cold and warm restarts on the example, ABBA: launcher and restart gaps, the launcher's cost."""
    order = [*TOOLS, *reversed(TOOLS)] * options.rounds
    samples: list[Sample] = []
    for index, tool in enumerate(order, 1):
        sample = run_once(tool, options.nproc)
        samples.append(sample)
        print(f"[{index}/{len(order)}] {tool:17s} exit {sample.returncode}  wall {sample.wall_s:6.1f} s  "
              f"generations {sample.generations}  restart gaps {[round(g, 2) for g in sample.restart_gaps]}",
              flush=True)

    launcher_help = help_time([str(BIN / "pai-launch"), "--help"])
    helps = {"bash loop": help_time([str(BIN / "torchrun"), "--help"]), "pai-launch --cold": launcher_help,
             "pai-launch": launcher_help}
    rows = {}
    for tool in TOOLS:
        mine = [s for s in samples if s.tool == tool]
        rows[tool] = {
            "tool": tool,
            "runs": len(mine),
            "failed_runs": sum(s.returncode != 0 for s in mine),
            "wall_s": mean([s.wall_s for s in mine]),
            "launcher_gap_s": mean([g for s in mine for g in s.launcher_gaps]),
            "restart_gap_s": mean([g for s in mine for g in s.restart_gaps]),
            "own_cpu_s": mean([s.own_cpu_s for s in mine]),
            "own_peak_rss_mb": max(s.own_peak_rss_mb for s in mine),
            "helper_cpu_s": mean([s.helper_cpu_s for s in mine]),
            "help_s": helps[tool],
        }
    print()
    print(f"{'':28s}{'bash loop':>11s}{'--cold':>9s}{'ratio':>7s}{'warm':>9s}{'ratio':>7s}")
    labels = [
        ("runs (failed)", None), ("total wall time, s", "wall_s"), ("launcher gap, s", "launcher_gap_s"),
        ("full restart gap, s", "restart_gap_s"), ("launcher own CPU, s", "own_cpu_s"),
        ("launcher own peak RSS, MB", "own_peak_rss_mb"), ("helper processes CPU, s", "helper_cpu_s"),
        ("--help start-up, s", "help_s"),
    ]
    ref, cold, warm = (rows[tool] for tool in TOOLS)
    for label, key in labels:
        if key is None:
            print(f"{label:28s}" + "".join(f"{r['runs']:>6d} ({r['failed_runs']})" + (" " * 7 if r is not ref else "")
                                           for r in (ref, cold, warm)))
            continue
        cells = f"{ref[key]:>11.2f}"
        for row in (cold, warm):
            ratio = row[key] / ref[key] if ref[key] else float("nan")
            cells += f"{row[key]:>9.2f}{ratio:>7.2f}"
        print(f"{label:28s}{cells}")
    print("(bash loop's own figures are bash's; its --help row is `torchrun --help`.)")
    print()
    targets = [
        ("warm full restart gap <= 0.3x the bash loop's", warm["restart_gap_s"] <= 0.3 * ref["restart_gap_s"]),
        ("warm whole run <= 0.6x the bash loop's", warm["wall_s"] <= 0.6 * ref["wall_s"]),
        ("launcher gap <= 0.5x the bash loop's (cold and warm)",
         max(cold["launcher_gap_s"], warm["launcher_gap_s"]) <= 0.5 * ref["launcher_gap_s"]),
        ("pai-launch peak RSS < 80 MB", max(cold["own_peak_rss_mb"], warm["own_peak_rss_mb"]) < 80),
        ("pai-launch --help < 0.5 s", warm["help_s"] < 0.5),
        ("every run completed (exit 0)", all(r["failed_runs"] == 0 for r in rows.values())),
    ]
    for text, met in targets:
        print(f"  [{'met' if met else 'MISSED'}] {text}")
    if options.json:
        options.json.write_text(json.dumps({"samples": [s.__dict__ for s in samples], "summary": list(rows.values())},
                                           indent=2))
    return 0 if all(met for _, met in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
