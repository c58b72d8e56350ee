"""Where a run's files go: LOG_ROOT/<run id>/<start>/generation-N, <start> naming this supervisor's start (UTC time
and pid), so runs sharing --log-dir, a --fresh rerun and a resumed one each read and count only their own; and the
private folders of pai-launch processes that were killed, cleared."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pai_launch.linux import privatedir
from pai_launch.supervise.job import plan

LOG_ROOT_PREFIX = privatedir.PREFIX


def start_folder_name(now: float, pid: int) -> str:
    """This supervisor start, sortable by time: `20260102T030405Z-1234`."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}-{pid}"


def make_run_root(log_root: Path, run_id: str, now: float, pid: int) -> Path:
    """A new folder for this start's files; never one an earlier start left (a suffix if the name is taken)."""
    parent = log_root / plan.path_safe(run_id)
    parent.mkdir(parents=True, exist_ok=True)
    base = start_folder_name(now, pid)
    for attempt in range(1, 1000):
        folder = parent / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"no free folder name under {parent} for {base}")


def remove_stale_log_roots() -> None:
    """Private folders of pai-launch processes that were killed (kill -9 skips our cleanup): only those whose lock
    no one holds, whatever PID namespace their owner runs in."""
    privatedir.remove_abandoned({tempfile.gettempdir(), "/tmp"}, LOG_ROOT_PREFIX)
