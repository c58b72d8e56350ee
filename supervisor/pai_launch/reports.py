"""What pai-launch says about a run's moments: the log line when a generation ends, and the one-line status a
service manager shows (systemd's STATUS=), both from the typed state."""

from __future__ import annotations

from pai_launch import failure_causes
from pai_launch.events import Cause, GenerationEnded
from pai_launch.exitcodes import describe_returncode
from pai_launch.machine_state import Phase, Policy, State


def generation_end(event: GenerationEnded, state: State, duration: float) -> tuple[str, dict]:
    """("generation_ended" | "generation_failed", fields): the root cause first, named by rank and exit."""
    fields = dict(generation=state.generation, duration_s=duration, complete=event.complete, switch_files=list(event.progressed))
    if event.stopped is not None:
        return "generation_stopped", {**fields, "reason": f"the job was stopped: {event.stopped[1]}"}
    if event.fatal is not None:
        return "generation_failed", {**fields, "error": event.fatal}
    if not event.failures:
        return "generation_ended", {**fields, "exit": "all workers exited 0"}
    first = event.failures[0]
    if first.cause is Cause.WORKER:
        where = {} if first.node is None else {"node": first.node, "host": first.host}
        return "generation_failed", {**fields, "rank": first.rank, **where, "exit": describe_returncode(first.returncode or 0),
                                     "failed_ranks": [f.rank for f in event.failures if f.cause is Cause.WORKER],
                                     "exit_codes": {str(f.rank): f.returncode for f in event.failures
                                                    if f.cause is Cause.WORKER and f.returncode is not None},
                                     "reached_training": state.current.reached_training,
                                     **failure_causes.fields(first.log_tail)}
    return "generation_failed", {**fields, "error": first.detail}


def phase_status(state: State, policy: Policy) -> str:
    """One line for `systemctl status`: what the run is doing now."""
    if state.phase is Phase.INIT:
        return "init run (--perforate_model_parallel)"
    if state.phase is Phase.ADOPTING:
        return "moving into the save folder the init run wrote to"
    if state.phase is Phase.TRAINING:
        retry = f" (after {state.failures} failed attempt(s))" if state.failures else ""
        return f"generation {state.generation} running{retry}"
    if state.phase is Phase.SETTLING:
        return "every worker exited 0; waiting for the shared save folder to show their files"
    if state.phase is Phase.BACKOFF:
        return f"retrying after failure {state.failures} of {policy.max_failures}: {state.reason}"
    if state.phase is Phase.STOPPING:
        return f"stopping: {state.reason}"
    if state.phase is Phase.DONE:
        return f"finished with exit code {state.exit_code}: {state.reason}"
    return "starting"
