"""--requeue-on's last step: node 0 asks Slurm to run the job again, and says whether Slurm will.

scontrol's exit code alone does not say. Slurm ends every process of the job as it requeues it, and `scontrol
requeue` is one of them: it can be killed after the requeue took effect, before it exits 0. So where it did not exit
0, Slurm's own count of the job's restarts (`Restarts=N` in `scontrol show job`) decides: one more than this run's
SLURM_RESTART_COUNT means the job was requeued. The verdict is pure; `requeue` is the thin part that runs scontrol.
"""

from __future__ import annotations

import re
import signal
import subprocess
from dataclasses import dataclass

#: How long each scontrol call may take. Slurm SIGKILLs what is left of the job KillWait (30 s by default) after
#: its SIGTERM, so the check after a killed requeue must be quick.
SCONTROL_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Requeue:
    """Whether Slurm will run the job again; how pai-launch knows (`evidence`), or why not (`error`)."""

    requeued: bool
    evidence: str = ""
    error: str = ""


def restarts_shown(shown: str) -> int | None:
    """Restarts=N from `scontrol show job`: how many times Slurm has requeued the job; None where it does not say."""
    match = re.search(r"\bRestarts=(\d+)\b", shown)
    return int(match.group(1)) if match else None


def verdict(requeue_error: str | None, restarts: int | None, restart_count: int) -> Requeue:
    """`requeue_error`: None where `scontrol requeue` exited 0, else how it ended; `restarts`: Slurm's Restarts=N
    asked after that (None: not known); `restart_count`: this run's SLURM_RESTART_COUNT."""
    if requeue_error is None:
        return Requeue(True, evidence="scontrol requeue exited 0")
    if restarts is not None and restarts > restart_count:
        return Requeue(True, evidence=f"scontrol requeue {requeue_error}, and Slurm counts {restarts} restart(s) of "
                                      f"the job where this run was started after {restart_count}")
    return Requeue(False, error=f"scontrol requeue {requeue_error}")


def how_it_ended(argv: list[str]) -> tuple[str | None, str]:
    """Run one scontrol command: (None, its output) where it exited 0, else (how it ended, its output)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"did not return within {SCONTROL_TIMEOUT_S:g} s", ""
    except OSError as exc:
        return f"could not start: {exc}", ""
    output = (done.stderr or done.stdout).strip()
    if done.returncode == 0:
        return None, done.stdout
    if done.returncode < 0:
        return f"was killed by {signal.Signals(-done.returncode).name}", output
    return f"exited {done.returncode}" + (f": {output}" if output else ""), output


def requeue(job_id: str, restart_count: int) -> Requeue:
    """Ask Slurm to requeue the job; where scontrol did not exit 0, ask Slurm whether the requeue took effect."""
    error, _ = how_it_ended(["scontrol", "requeue", job_id])
    if error is None:
        return verdict(None, None, restart_count)
    shown_error, shown = how_it_ended(["scontrol", "show", "job", job_id])
    return verdict(error, None if shown_error else restarts_shown(shown), restart_count)
