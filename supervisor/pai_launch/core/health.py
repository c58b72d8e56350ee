"""Whether a run is healthy, for the metrics port's /healthz and /livez: a pure judgement of what the metrics know.

/livez asks only whether the supervisor's loop still turns (a probe that restarts a container on it restarts only a
stuck pai-launch); /healthz also asks whether the run is doing well: not failing generation after generation, not
ended with a fault. Time arrives as `now` (the monotonic clock), as everywhere in the core.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The loop turns every fraction of a second (its tick); this much silence means it is stuck, not busy.
LOOP_SILENT_AFTER = 10.0


@dataclass(frozen=True)
class RunHealth:
    """What the judgement reads: when the loop last turned, the failures in a row, and the run's exit once it ended."""

    loop_turned_at: float | None = None
    consecutive_failures: int = 0
    exit_code: int | None = None


@dataclass(frozen=True)
class Verdict:
    healthy: bool
    reason: str

    @property
    def status(self) -> int:
        """The HTTP status a probe reads."""
        return 200 if self.healthy else 503


def liveness(health: RunHealth, now: float) -> Verdict:
    """Alive while the loop turns; a run that has not started its loop yet is not alive."""
    if health.loop_turned_at is None:
        return Verdict(False, "the supervisor loop has not started")
    silent = now - health.loop_turned_at
    if silent > LOOP_SILENT_AFTER:
        return Verdict(False, f"the supervisor loop has not turned for {silent:.0f} s")
    return Verdict(True, "the supervisor loop turns")


def readiness(health: RunHealth, now: float) -> Verdict:
    """Healthy while alive and not failing: no failed generation since the last progress, no faulty end."""
    alive = liveness(health, now)
    if not alive.healthy:
        return alive
    if health.exit_code is not None and health.exit_code != 0:
        return Verdict(False, f"the run ended with exit code {health.exit_code}")
    if health.consecutive_failures > 0:
        return Verdict(False, f"failing: {health.consecutive_failures} failed generation(s) in a row without progress")
    if health.exit_code == 0:
        return Verdict(True, "the run ended with exit code 0")
    return Verdict(True, "running")
