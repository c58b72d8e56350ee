#!/usr/bin/env python3
"""The GPU check: what only a machine with an NVIDIA GPU can show, in one table, in under 8 minutes.

Four runs of examples/train_pai_ddp.py with --nproc 1 (a restructure every epoch): warm restarts and --restructure
in-process with 10 dendrites, cold restarts with 4, and warm restarts with 3 under TORCH_DIST_USE_NCCL2=0. Meanwhile
`nvidia-smi --query-compute-apps` is read every half second and each process that holds GPU memory is matched to its
role (pai-launch, its agent, the forkserver, a worker). The table:

- the forkserver and the agent hold no GPU memory and never made a CUDA context (they never appear as compute apps);
- warm workers are not bad forks: every warm generation's worker used the GPU and exited 0 (a fork of a process that
  initialised CUDA fails on its first CUDA call), and how long a worker takes to its first CUDA call, warm and cold;
- NCCL through 10+ generations with --nproc 1 (the process group's backend and its class, as each worker reports it);
- the NCCL torch picks for `nccl`: NCCL2 by default from torch 2.15 (a row that says n/a on an older torch), and the
  older ProcessGroupNCCL under TORCH_DIST_USE_NCCL2=0;
- the restart gap, cold vs warm vs in-process (add_validation_score returning with a switch file written -> the next
  optimizer step), with cold's as a multiple of the others;
- GPU memory across the 10 in-process restructures (torch.cuda.memory_allocated before and after each re-wrap, as
  rank 0 recorded it).

Usage: scripts/gpu-check.sh (which runs this with the project's environment), or python scripts/gpu_check.py;
PAI_LAUNCH_GPU_LOGS=DIR keeps each run's output there (DIR/MODE.log).
Exit 0 when every check passes (a row that does not apply to this torch says n/a), 1 when one fails, 2 when there is
no GPU to check.
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
sys.path.insert(0, str(ROOT / "supervisor"))  # pai_launch from this checkout, as the launches it starts use it

from pai_launch.backends import torch_release  # noqa: E402

EXAMPLE = ROOT / "examples" / "train_pai_ddp.py"
LINE = re.compile(r"PAI_EXAMPLE (\{.*\})")
DENDRITES = 10
#: Dendrites per run: cold restarts cost the most, the rollback run only has to train through a few generations.
RUN_DENDRITES = {"warm": DENDRITES, "in-process": DENDRITES, "cold": 4, "legacy-nccl": 3}
RUN_FLAGS = {"warm": [], "in-process": ["--restructure", "in-process"], "cold": ["--cold"], "legacy-nccl": []}
RUN_ENV = {"legacy-nccl": {"TORCH_DIST_USE_NCCL2": "0"}}
RUN_TIMEOUT = 150
#: The torch from which `nccl` means ProcessGroupNCCL2 unless TORCH_DIST_USE_NCCL2=0.
NCCL2_DEFAULT_FROM = (2, 15)


@dataclass
class Run:
    """One launch: its exit, pai-launch's events, the example's progress lines, and who held GPU memory."""

    mode: str
    returncode: int = -1
    events: list[dict] = field(default_factory=list)
    progress: list[dict] = field(default_factory=list)
    #: role -> the most GPU memory (MiB) any process of that role held while sampled.
    gpu_mib: dict[str, int] = field(default_factory=dict)
    #: Compute apps nvidia-smi listed at all, ours or not: none where it cannot see this PID namespace (a sandbox).
    apps_seen: int = 0
    #: role -> the /dev/nvidia* files its processes held open while sampled (a CUDA context opens the GPU's own).
    device_files: dict[str, set[str]] = field(default_factory=dict)


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


def first_cuda_calls(progress: list[dict]) -> list[float]:
    """Per worker process: its start (the script's first line) -> its first CUDA call returned (pure)."""
    started = {p["pid"]: p["t"] for p in progress if p["event"] == "process_start"}
    return [p["t"] - started[p["pid"]] for p in progress if p["event"] == "cuda_ready" and p["pid"] in started]


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


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


def nvidia_files(pid: int) -> set[str]:
    """The /dev/nvidia* files a process holds open (none where /proc does not say)."""
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/dev/nvidia"):
            found.add(target)
    return found


class GpuSampler(threading.Thread):
    """Who holds GPU memory, every half second, by role (its record is not `self.run`: that is Thread's method)."""

    def __init__(self, root_pid: int, record: Run) -> None:
        super().__init__(daemon=True)
        self.root_pid, self.record, self.stop = root_pid, record, threading.Event()

    def run(self) -> None:  # noqa: D102 - threading's
        import psutil

        while not self.stop.wait(0.5):
            done = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                   "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True, check=False)
            try:
                ours = {p.pid: p for p in psutil.Process(self.root_pid).children(recursive=True)}
            except psutil.Error:
                continue
            apps = compute_apps(done.stdout)
            self.record.apps_seen += len(apps)
            for process in ours.values():
                files = nvidia_files(process.pid)
                if files:
                    try:
                        role = role_of(" ".join(process.cmdline()), " ".join(process.parent().cmdline()))
                    except psutil.Error:
                        continue
                    self.record.device_files.setdefault(role, set()).update(files)
            for pid, mib in apps.items():
                process = ours.get(pid)
                if process is None:
                    continue
                try:
                    role = role_of(" ".join(process.cmdline()), " ".join(process.parent().cmdline()))
                except psutil.Error:
                    continue
                self.record.gpu_mib[role] = max(self.record.gpu_mib.get(role, 0), mib)


def launch(mode: str) -> Run:
    import psutil  # noqa: F401 - the sampler's; fail here, not in its thread

    run = Run(mode)
    with tempfile.TemporaryDirectory(prefix=f"pai-gpu-{mode}-") as work:
        argv = [sys.executable, "-m", "pai_launch", "--nproc", "1", "--log-format", "json", *RUN_FLAGS[mode],
                str(EXAMPLE), "--max-dendrites", str(RUN_DENDRITES[mode]), "--switch-epochs", "1", "--epochs-max",
                "40", "--no-graphs"]
        inherited = os.environ.get("PYTHONPATH")
        paths = os.pathsep.join([str(ROOT / "supervisor"), *([inherited] if inherited else [])])
        env = {**os.environ, **RUN_ENV.get(mode, {}), "PYTHONPATH": paths}
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
    logs = os.environ.get("PAI_LAUNCH_GPU_LOGS")
    if logs:  # each run's whole output, for a failure the table only names
        Path(logs).mkdir(parents=True, exist_ok=True)
        (Path(logs) / f"{mode}.log").write_text(f"$ {' '.join(argv)}\n--- stderr\n{err}\n--- stdout\n{out}")
    run.progress = [json.loads(m.group(1)) for m in map(LINE.search, out.splitlines()) if m]
    run.events = [json.loads(line) for line in err.splitlines() if line.startswith("{") and '"event"' in line]
    return run


def table(runs: dict[str, Run], torch_version: str) -> list[tuple[str, str, bool | None]]:
    """(check, what was seen, passed: None where the check does not apply to this torch) for each row (pure)."""
    rows: list[tuple[str, str, bool | None]] = []
    held = {role: max(run.gpu_mib.get(role, 0) for run in runs.values()) for role in ("agent", "forkserver")}
    seen = {role: any(role in run.gpu_mib for run in runs.values()) for role in ("agent", "forkserver")}
    visible = sum(run.apps_seen for run in runs.values()) > 0
    files = {role: sorted(set().union(*(run.device_files.get(role, set()) for run in runs.values())))
             for role in ("agent", "forkserver", "worker")}
    opened = "; open: " + ", ".join(f"{role} {' '.join(f) or 'none'}" for role, f in files.items())
    rows.append(("agent and forkserver: GPU memory, CUDA context",
                 (f"agent {held['agent']} MiB, forkserver {held['forkserver']} MiB; contexts: "
                  f"{', '.join(r for r, s in seen.items() if s) or 'none'}" if visible else
                  "n/a: nvidia-smi lists no processes here (another PID namespace)") + opened,
                 not any(seen.values()) if visible else None))
    warm = runs["warm"]
    generations = len([e for e in warm.events if e.get("event") == "generation_started"])
    calls = {mode: first_cuda_calls(runs[mode].progress) for mode in ("warm", "cold")}
    rows.append(("warm workers are not bad forks",
                 f"exit {warm.returncode}, {generations} generations, {len(calls['warm'])} workers made a CUDA call, "
                 + (f"workers on the GPU: {warm.gpu_mib.get('worker', 0)} MiB at most" if visible else
                    "(nvidia-smi lists no processes here)"),
                 warm.returncode == 0 and len(calls["warm"]) >= generations > 0
                 and (not visible or "worker" in warm.gpu_mib)))
    rows.append(("a worker's start -> its first CUDA call, s: warm / cold",
                 f"{mean(calls['warm']):.3f} ({len(calls['warm'])}) / {mean(calls['cold']):.3f} "
                 f"({len(calls['cold'])})", len(calls["warm"]) >= generations > 0 and len(calls["cold"]) > 0))
    firsts = [p for mode in ("warm", "cold", "in-process") for p in runs[mode].progress if p["event"] == "first_step"]
    backends = {str(p.get("backend")) for p in firsts}
    classes = {str(p.get("nccl_class")) for p in firsts}
    rows.append(("NCCL through 10 generations, --nproc 1",
                 f"{generations} generations, backends {sorted(backends)}, classes {sorted(classes)}",
                 generations >= DENDRITES + 1 and backends == {"nccl"}))
    newest = torch_release(torch_version) >= NCCL2_DEFAULT_FROM
    rows.append(("`nccl` is NCCL2 by default (torch 2.15 and later)",
                 f"torch {torch_version}: classes {sorted(classes)}" if newest else
                 f"n/a: torch {torch_version} predates NCCL2 as the default (classes {sorted(classes)})",
                 classes == {"ProcessGroupNCCL2"} if newest else None))
    legacy = runs["legacy-nccl"]
    legacy_classes = {str(p.get("nccl_class")) for p in legacy.progress if p["event"] == "first_step"}
    legacy_generations = len([e for e in legacy.events if e.get("event") == "generation_started"])
    rows.append(("TORCH_DIST_USE_NCCL2=0: the older NCCL, trained through",
                 f"exit {legacy.returncode}, {legacy_generations} generations, classes {sorted(legacy_classes)}",
                 legacy.returncode == 0 and legacy_generations >= RUN_DENDRITES["legacy-nccl"] + 1
                 and legacy_classes == {"ProcessGroupNCCL"}))
    gaps = {mode: restart_gaps(runs[mode].progress) for mode in ("cold", "warm", "in-process")}
    means = {mode: mean(g) for mode, g in gaps.items()}
    rows.append(("restart gap, s: cold / warm / in-process",
                 " / ".join(f"{means[m]:.3f} ({len(gaps[m])})" for m in ("cold", "warm", "in-process"))
                 + f"; cold is {means['cold'] / means['warm']:.1f}x warm, {means['cold'] / means['in-process']:.1f}x "
                 f"in-process",
                 all(len(gaps[m]) >= RUN_DENDRITES[m] for m in gaps) and means["in-process"] < means["warm"]
                 < means["cold"]))
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
    runs = {mode: launch(mode) for mode in RUN_DENDRITES}
    rows = table(runs, torch.__version__)
    width = max(len(check) for check, _, _ in rows)
    nccl = ".".join(map(str, torch.cuda.nccl.version()))
    print(f"pai-launch GPU check on {torch.cuda.get_device_name(0)}, torch {torch.__version__} (CUDA "
          f"{torch.version.cuda}, NCCL {nccl}), Python {sys.version.split()[0]}, {time.monotonic() - started:.0f} s")
    for check, seen, passed in rows:
        print(f"{check:<{width}}  {'n/a ' if passed is None else 'PASS' if passed else 'FAIL'}  {seen}")
    for mode, run in runs.items():
        if run.returncode != 0:
            print(f"--- {mode}: exit {run.returncode}; its last events:", *map(json.dumps, run.events[-8:]), sep="\n")
    return 0 if all(passed is not False for _, _, passed in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
