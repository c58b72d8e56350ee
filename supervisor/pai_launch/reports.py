"""What pai-launch's log says when a generation ends: the event name and its fields, from the typed result."""

from __future__ import annotations

from pai_launch.events import Cause, GenerationEnded
from pai_launch.exitcodes import describe_returncode
from pai_launch.machine_state import State


def generation_end(event: GenerationEnded, state: State, duration: float) -> tuple[str, dict]:
    """("generation_ended" | "generation_failed", fields): the root cause first, named by rank and exit."""
    fields = dict(generation=state.generation, duration_s=duration, complete=event.complete, switch_files=list(event.progressed))
    if not event.failures:
        return "generation_ended", {**fields, "exit": "all workers exited 0"}
    first = event.failures[0]
    if first.cause is Cause.WORKER:
        return "generation_failed", {**fields, "rank": first.rank, "exit": describe_returncode(first.returncode or 0),
                                     "failed_ranks": [f.rank for f in event.failures if f.cause is Cause.WORKER],
                                     "reached_training": state.reached_training}
    return "generation_failed", {**fields, "error": first.detail}
