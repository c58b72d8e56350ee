"""The CPU and memory limits of the control group this process runs in (a container's, a Slurm job's, a systemd
unit's), which the core count and the machine's memory do not show: a run that is throttled or OOM-killed well below
what the machine has is explained by them.

cgroup v2 (`cpu.max`, `memory.max`) and v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`, `memory.limit_in_bytes`) are
both read. The limit that applies is the smallest on the way from the process's own group up to the root, so every
level is read. The parsers are pure; `limits()` is the one reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
#: v1 writes "no limit" as a huge page-aligned number (2**63 rounded down to a page) rather than a word.
V1_UNLIMITED = 2**62


@dataclass(frozen=True)
class Limits:
    #: CPU cores' worth of time per period the group may use (1.5: one and a half cores); None: no limit.
    cpu: float | None
    #: Bytes of memory the group may use; None: no limit.
    memory: int | None


def groups(text: str) -> dict[str, str]:
    """/proc/self/cgroup's lines ('4:memory:/job/1', '0::/user.slice') as controller -> path; "" is v2's."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            found[controller] = parts[2]
    return found


def cpu_max(text: str) -> float | None:
    """v2's cpu.max ('200000 100000' -> 2.0; 'max 100000' -> None)."""
    parts = text.split()
    if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit() or int(parts[1]) == 0:
        return None
    return int(parts[0]) / int(parts[1])


def cpu_quota(quota: str, period: str) -> float | None:
    """v1's cpu.cfs_quota_us over cpu.cfs_period_us ('-1' quota: no limit)."""
    quota, period = quota.strip(), period.strip()
    if not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return None
    return int(quota) / int(period)


def memory_bytes(text: str) -> int | None:
    """memory.max (v2: a number or 'max') or memory.limit_in_bytes (v1: a number, huge when unlimited)."""
    text = text.strip()
    if not text.isdigit() or int(text) >= V1_UNLIMITED:
        return None
    return int(text)


def smallest(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return min(known) if known else None


def limits(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> Limits:
    """This process's limits; Limits(None, None) where there are no control groups to read."""
    try:
        where = groups(self_cgroup.read_text())
    except OSError:
        return Limits(None, None)
    if (root / "cgroup.controllers").exists():  # v2 alone, mounted at the root
        levels = _levels(root, where.get("", "/"))
        cpu = smallest([cpu_max(_read(level / "cpu.max")) for level in levels])
        memory = smallest([memory_bytes(_read(level / "memory.max")) for level in levels])
        return Limits(cpu, None if memory is None else int(memory))
    cpu_mount = next((root / name for name in ("cpu,cpuacct", "cpu") if (root / name).is_dir()), None)
    cpu_levels = _levels(cpu_mount, where.get("cpu", "/")) if cpu_mount else []
    memory_levels = _levels(root / "memory", where.get("memory", "/")) if (root / "memory").is_dir() else []
    cpu = smallest([cpu_quota(_read(level / "cpu.cfs_quota_us"), _read(level / "cpu.cfs_period_us"))
                    for level in cpu_levels])
    memory = smallest([memory_bytes(_read(level / "memory.limit_in_bytes")) for level in memory_levels])
    return Limits(cpu, None if memory is None else int(memory))


def _levels(mount: Path, path: str) -> list[Path]:
    """The group's folder and every one above it up to the mount. Inside a container without a cgroup namespace the
    path names the host's hierarchy, which is not mounted here: then the mount itself is the container's group."""
    folder = mount / path.lstrip("/")
    if not folder.is_dir():
        return [mount]
    levels = [folder]
    while folder != mount:
        folder = folder.parent
        levels.append(folder)
    return levels


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
