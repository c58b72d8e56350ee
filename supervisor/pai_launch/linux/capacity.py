"""How many workers this machine can hold: more than its CPU cores is a warning, more than the open-files limit
can hold is refused before anything starts (else the agent fails minutes later with "Too many open files").

The checks are pure; the two readers at the end are the only calls into the OS.
"""

from __future__ import annotations

import os
import resource

#: Open files each worker costs, counted on the generous side. Measured with warm workers of the fake trainer: the agent
#: held 32 files with 1 worker and 67 with 8 (about 5 per worker: each rank's stdout and stderr files, the relay
#: reading them again, its forkserver connection), and each worker 14 and 28 (it sees its peers); a real process
#: group adds a socket per peer in each worker, under the same limit, inherited.
FDS_PER_WORKER = 8
#: What the agent and pai-launch need before any worker: the interpreter, log files, inotify, the store's sockets.
FDS_BASE = 64


def fds_needed(nproc: int) -> int:
    return FDS_BASE + FDS_PER_WORKER * nproc


def open_files_problem(nproc: int, limit: int | None) -> str | None:
    """Why `nproc` workers cannot be held under an open-files limit of `limit` (None: unlimited), or None."""
    if limit is None or fds_needed(nproc) <= limit:
        return None
    most = max((limit - FDS_BASE) // FDS_PER_WORKER, 0)
    return (f"--nproc {nproc} needs about {fds_needed(nproc)} open files, more than this process's limit of {limit} "
            f"(ulimit -n): give at most --nproc {most}, or raise the limit (e.g. ulimit -n 65536, or LimitNOFILE= "
            "in a systemd unit)")


def cores_warning(nproc: int, cores: int) -> dict | None:
    """Log fields for a warning when `nproc` workers are more than the `cores` CPU cores this process may use."""
    if nproc <= cores:
        return None
    return {"nproc": nproc, "cores": cores,
            "hint": "more workers than CPU cores slows every one of them down: without GPUs, give at most --nproc "
            f"{cores}"}


def open_files_limit() -> int | None:
    """This process's soft RLIMIT_NOFILE, which every process it starts inherits; None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, e.g. a container's or Slurm's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1
