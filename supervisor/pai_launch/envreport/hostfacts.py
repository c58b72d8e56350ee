"""This machine as a bug report needs it: the OS, kernel and libc, CPU cores and memory with the control group's
limits, the open-files limit, the NVIDIA driver's version, and the environment variables that change a run.

Each reader is passed in, so the facts can be built from fixed values in a test; the defaults read this machine.
"""

from __future__ import annotations

import os
import platform
import resource
from collections.abc import Callable, Mapping
from pathlib import Path

from pai_launch.linux import capacity, cgroups

OS_RELEASE = Path("/etc/os-release")
NVIDIA_VERSION = Path("/proc/driver/nvidia/version")
MEMINFO = Path("/proc/meminfo")
#: Variables shown whatever their name: pai-launch's own are matched by prefix, the Slurm ones it reads are passed in.
SHOWN_VARIABLES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT")
#: Prefixes of variables that change how torch, NCCL or pai-launch behave.
SHOWN_PREFIXES = ("PAI_LAUNCH_", "NCCL_", "TORCH_", "TORCHELASTIC_", "PYTORCH_", "CUDA_LAUNCH_", "GLOO_")


def system(read: Callable[[Path], str] = Path.read_text) -> dict:
    uname = platform.uname()
    return {"os": uname.system, "kernel": uname.release, "machine": uname.machine,
            "distribution": distribution(_quiet(read, OS_RELEASE)), "libc": libc()}


def distribution(os_release: str) -> str | None:
    """PRETTY_NAME from /etc/os-release ('Debian GNU/Linux 12 (bookworm)'), None without one."""
    for line in os_release.splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "PRETTY_NAME":
            return value.strip().strip('"') or None
    return None


def libc() -> str | None:
    """'glibc 2.36', or what platform makes of it elsewhere (musl is not named by either)."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        found = None
    if found:
        return found
    name, version = platform.libc_ver()
    return f"{name} {version}".strip() or None


def driver_version(text: str) -> str | None:
    """The version in /proc/driver/nvidia/version's first line ('NVRM version: NVIDIA UNIX x86_64 Kernel Module
    550.54.15  Tue Mar ...')."""
    first = text.splitlines()[0] if text else ""
    for word in first.split():
        parts = word.split(".")
        if len(parts) >= 2 and all(part.isdigit() for part in parts):
            return word
    return None


def gpu_driver(read: Callable[[Path], str] = Path.read_text) -> str | None:
    return driver_version(_quiet(read, NVIDIA_VERSION))


def memory_total(meminfo: str) -> int | None:
    """MemTotal from /proc/meminfo, in bytes."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) >= 2 and parts[1].isdigit() else None
    return None


def cpu(*, cores: Callable[[], int] = capacity.usable_cores, count: Callable[[], int | None] = os.cpu_count,
        limits: Callable[[], cgroups.Limits] = cgroups.limits,
        read: Callable[[Path], str] = Path.read_text) -> dict:
    """The cores this process may run on (its affinity), the machine's, and the control group's limits."""
    found = limits()
    return {"usable_cores": cores(), "machine_cores": count(), "cgroup_cpu_limit": found.cpu,
            "memory_bytes": memory_total(_quiet(read, MEMINFO)), "cgroup_memory_limit_bytes": found.memory}


def open_files(*, limits: Callable[[], tuple[int, int]] = lambda: resource.getrlimit(resource.RLIMIT_NOFILE)) -> dict:
    """The open-files limit (None: unlimited) and the most workers it holds, counted as a launch's preflight does."""
    soft, hard = (None if value == resource.RLIM_INFINITY else value for value in limits())
    most = None if soft is None else max((soft - capacity.FDS_BASE) // capacity.FDS_PER_WORKER, 0)
    return {"soft": soft, "hard": hard, "most_workers": most}


def variables(env: Mapping[str, str], read_by_launch: tuple[str, ...]) -> dict[str, str]:
    """The variables that change a run, sorted: pai-launch's own, the Slurm ones a launch reads, CUDA's, NCCL's and
    torch's."""
    shown = set(SHOWN_VARIABLES) | set(read_by_launch)
    return {name: env[name] for name in sorted(env) if name in shown or name.startswith(SHOWN_PREFIXES)}


def _quiet(read: Callable[[Path], str], path: Path) -> str:
    try:
        return read(path)
    except OSError:
        return ""
