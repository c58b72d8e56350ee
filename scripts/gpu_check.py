#!/usr/bin/env python3
"""The GPU check: what only a machine with an NVIDIA GPU can show, in one table, in under 8 minutes.

Three runs of examples/train_pai_ddp.py with --nproc 1 and 10 dendrites (a restructure every epoch): warm restarts,
cold restarts, and --restructure in-process. Meanwhile `nvidia-smi --query-compute-apps` is read every half second and
each process that holds GPU memory is matched to its role (pai-launch, its agent, the forkserver, a worker). The table:

- the forkserver and the agent hold no GPU memory and never made a CUDA context (they never appear as compute apps);
- warm workers are not bad forks: every warm generation's worker used the GPU and exited 0 (a fork of a process that
  initialised CUDA fails on its first CUDA call);
- NCCL through 10+ generations with --nproc 1 (the process group's backend, as each worker reports it);
- the restart gap, cold vs warm vs in-process (add_validation_score returning with a switch file written -> the next
  optimizer step);
- GPU memory across the 10 in-process restructures (torch.cuda.memory_allocated before and after each re-wrap, as
  rank 0 recorded it).

Usage: scripts/gpu-check.sh (which runs this with the project's environment), or python scripts/gpu_check.py.
Exit 0 when every check passes, 1 when one fails, 2 when there is no GPU to check.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "train_pai_ddp.py"
LINE = re.compile(r"PAI_EXAMPLE (\{.*\})")
DENDRITES = 10
RUN_TIMEOUT = 150


@dataclass
class Run:
    """One launch: its exit, pai-launch's events, the example's progress lines, and who held GPU memory."""

    mode: str
    returncode: int = -1
    events: list[dict] = field(default_factory=list)
    progress: list[dict] = field(default_factory=list)
    #: role -> the most GPU memory (MiB) any process of that role held while sampled.
    gpu_mib: dict[str, int] = field(default_factory=dict)


def compute_apps(text: str) -> dict[int, int]:
    """`nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits` as {pid: MiB} (pure)."""
    apps = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            apps[int(parts[0])] = int(parts[1]) if parts[1].isdigit() else 0
    return apps


def role_of(cmdline: str, parent_cmdline: str) -> str:
    """Which of pai-launch's processes a command line is (pure)."""
    if "pai_launch.agent.main" in cmdline or "pai_launch/agent/main" in cmdline:
        return "agent"
    if "-m pai_launch " in cmdline or cmdline.split(" ")[0].endswith("pai-launch"):
        return "pai-launch"
    if "multiprocessing.forkserver" in cmdline:
        forked = "multiprocessing.forkserver" in parent_cmdline
        return "worker" if forked else "forkserver"
    if "train_pai_ddp.py" in cmdline or "pai_launch.forkserver" in cmdline:
        return "worker"
    return "other"


def restart_gaps(progress: list[dict]) -> list[float]:
    """Rank 0's add_validation_score returning with a switch file written -> its next optimizer step (pure)."""
    gaps, switched = [], None
    for line in sorted((p for p in progress if p.get("rank", 0) == 0), key=lambda p: p["t"]):
        if line["event"] == "switched":
            switched = line["t"]
        elif line["event"] == "first_step" and switched is not None:
            gaps.append(line["t"] - switched)
            switched = None
    return gaps


class GpuSampler(threading.Thread):
    def __init__(self, root_pid: int, run: Run) -> None:
        super().__init__(daemon=True)
        self.root_pid, self.run, self.stop = root_pid, run, threading.Event()

    def run(self) -> None:  # noqa: D102 - threading's
        import psutil

        while not self.stop.wait(0.5):
            done = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True, check=False)
            try:
                ours = {p.pid: p for p in psutil.Process(self.root_pid).children(recursive=True)}
            except psutil.Error:
                continue
            for pid, mib in compute_apps(done.stdout).items():
                process = ours.get(pid)
                if process is None:
                    continue
                try:
                    role = role_of(" ".join(process.cmdline()), " ".join(process.parent().cmdline()))
                except psutil.Error:
                    continue
                self.run.gpu_mib[role] = max(self.run.gpu_mib.get(role, 0), mib)


def launch(mode: str) -> Run:
    import psutil  # noqa: F401 - the sampler's; fail here, not in its thread

    run = Run(mode)
    flags = {"cold": ["--cold"], "warm": [], "in-process": ["--restructure", "in-process"]}[mode]
    with tempfile.TemporaryDirectory(prefix=f"pai-gpu-{mode}-") as work:
        argv = [sys.executable, "-m", "pai_launch", "--nproc", "1", "--log-format", "json", *flags, str(EXAMPLE),
                "--max-dendrites", str(DENDRITES), "--switch-epochs", "1", "--epochs-max", "40", "--no-graphs"]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "supervisor")}
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sampler = GpuSampler(proc.pid, run)
        sampler.start()
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.terminate()
            out, err = proc.communicate(timeout=60)
        sampler.stop.set()
        sampler.join()
    run.returncode = proc.returncode
    run.progress = [json.loads(m.group(1)) for m in map(LINE.search, out.splitlines()) if m]
    run.events = [json.loads(line) for line in err.splitlines() if line.startswith("{") and '"event"' in line]
    return run


def table(runs: dict[str, Run]) -> list[tuple[str, str, bool]]:
    """(check, what was seen, passed) for each line of the report (pure)."""
    rows = []
    held = {role: max(run.gpu_mib.get(role, 0) for run in runs.values()) for role in ("agent", "forkserver")}
    seen = {role: any(role in run.gpu_mib for run in runs.values()) for role in ("agent", "forkserver")}
    rows.append(("agent and forkserver: GPU memory, CUDA context",
                 f"agent {held['agent']} MiB, forkserver {held['forkserver']} MiB; contexts: "
                 f"{', '.join(r for r, s in seen.items() if s) or 'none'}", not any(seen.values())))
    warm = runs["warm"]
    generations = len([e for e in warm.events if e.get("event") == "generation_started"])
    rows.append(("warm workers are not bad forks",
                 f"exit {warm.returncode}, {generations} generations, workers on the GPU: "
                 f"{warm.gpu_mib.get('worker', 0)} MiB at most", warm.returncode == 0 and "worker" in warm.gpu_mib))
    backends = {p.get("backend") for run in runs.values() for p in run.progress if p["event"] == "first_step"}
    rows.append(("NCCL through 10 generations, --nproc 1", f"{generations} generations, backends {sorted(map(str, backends))}",
                 generations >= DENDRITES + 1 and backends == {"nccl"}))
    gaps = {mode: restart_gaps(run.progress) for mode, run in runs.items()}
    mean = {mode: (sum(g) / len(g) if g else float("nan")) for mode, g in gaps.items()}
    rows.append(("restart gap, s: cold / warm / in-process",
                 " / ".join(f"{mean[m]:.3f} ({len(gaps[m])})" for m in ("cold", "warm", "in-process")),
                 all(len(gaps[m]) >= DENDRITES for m in gaps) and mean["in-process"] < mean["warm"] < mean["cold"]))
    records = [e for e in runs["in-process"].events if e.get("event") == "restructured_in_process"]
    before = [e.get("memory_before") for e in records]
    after = [e.get("memory_after") for e in records]
    mib = lambda values: ", ".join(f"{v / 2**20:.1f}" if isinstance(v, int) else "?" for v in values)  # noqa: E731
    flat = len(records) >= DENDRITES and all(isinstance(v, int) for v in before + after) and \
        max(after) - min(after) <= 64 * 2**20
    rows.append(("GPU memory across 10 in-process restructures, MiB",
                 f"after each: {mib(after)} (before each: {mib(before)})", flat))
    rows.append(("every run exit 0", ", ".join(f"{m} {r.returncode}" for m, r in runs.items()),
                 all(r.returncode == 0 for r in runs.values())))
    return rows


def main() -> int:
    if shutil.which("nvidia-smi") is None:
        print("gpu-check: no nvidia-smi: run this on a machine with an NVIDIA GPU and its driver", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print(f"gpu-check: torch {torch.__version__} sees no CUDA device: install a CUDA build of torch",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    runs = {mode: launch(mode) for mode in ("warm", "cold", "in-process")}
    rows = table(runs)
    width = max(len(check) for check, _, _ in rows)
    print(f"pai-launch GPU check on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"{time.monotonic() - started:.0f} s")
    for check, seen, passed in rows:
        print(f"{check:<{width}}  {'PASS' if passed else 'FAIL'}  {seen}")
    return 0 if all(passed for _, _, passed in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
