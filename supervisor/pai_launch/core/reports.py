"""What pai-launch says about a run's moments: the log line when a generation ends, and the one-line status a
service manager shows (systemd's STATUS=), both from the typed state."""

from __future__ import annotations

from pai_launch.core.actions import ReportGenerationEnd
from pai_launch.core.events import GenerationEnded
from pai_launch.core.exitcodes import describe_returncode
from pai_launch.core.failure import Cause, Failure
from pai_launch.core.observations import AgentGone, AgentStarted
from pai_launch.core.state import Phase, Policy, State
from pai_launch.wire import failure_causes, log_events
from pai_launch.wire.protocol import AgentReady


def generation_end(report: ReportGenerationEnd) -> tuple[str, dict]:
    """("generation_ended" | "generation_failed" | "generation_stopped", fields): a failure's root cause first, named
    by rank and exit. A generation ended by a stop that was asked for (a stop signal here, or the job stopped from
    another node) is stopped, not failed, whatever its workers' exits."""
    event = report.event
    fields = dict(generation=report.generation, duration_s=report.duration, complete=event.complete,
                  switch_files=list(event.progressed))
    if event.stopped is not None:
        return log_events.GENERATION_STOPPED, {**fields, "cause": event.stopped.reason, "reason": "the job was "
                                               f"stopped: {event.stopped.reason}",
                                      **stop_fields(event)}
    if report.stopped_by is not None:
        return log_events.GENERATION_STOPPED, {**fields, "cause": report.stopped_by, "reason": report.reason,
                                               **stop_fields(event)}
    if event.fatal is not None:
        return log_events.GENERATION_FAILED, {**fields, "error": event.fatal}
    if event.complete or report.marker_seen:  # terminal: what came after the marker fails nothing (outcomes.py)
        return log_events.GENERATION_ENDED, {**fields, "complete": True, "exit": after_marker(event)}
    if not event.failures:
        return log_events.GENERATION_ENDED, {**fields, "exit": "all workers exited 0"}
    first = event.failures[0]
    if first.cause is Cause.WORKER:
        where = {} if first.node is None else {"node": first.node, "host": first.host}
        return log_events.GENERATION_FAILED, {**fields, "rank": first.rank, **where,
                                              "exit": describe_returncode(first.returncode or 0),
                                     "failed_ranks": [f.rank for f in event.failures if f.cause is Cause.WORKER],
                                     "exit_codes": {str(f.rank): f.returncode for f in event.failures
                                                    if f.cause is Cause.WORKER and f.returncode is not None},
                                     "reached_training": report.reached_training,
                                     **failure_causes.fields(first.log_tail)}
    return log_events.GENERATION_FAILED, {**fields, "error": first.detail}


def after_marker(event: GenerationEnded) -> str:
    """How a complete generation's workers ended: the first that did not exit 0 (a process group's abort at exit,
    a peer node lost or late once the marker was written) is said, but as what followed completion."""
    if not event.failures:
        return "all workers exited 0"
    first = event.failures[0]
    what = f"rank {first.rank}: {describe_returncode(first.returncode or 0)}" if first.cause is Cause.WORKER \
        else first.detail
    return f"training complete, then {what}"


def own_crash(failure: Failure) -> bool:
    """A rank that exited with a code of its own (1..127) during a stop: a crash the stop does not explain (a stopped
    worker dies of the signal, or exits 128+N from its handler; a killed agent is the stop's doing too)."""
    return failure.cause is Cause.WORKER and failure.returncode is not None and 0 < failure.returncode < 128


def stop_fields(event: GenerationEnded) -> dict:
    """What a stopped generation's log line says of its workers: each rank's exit code, and a rank that crashed of
    its own (the first) with the line that explains it, so that a crash just before the stop is not lost."""
    workers = [f for f in event.failures if f.cause is Cause.WORKER and f.returncode is not None]
    fields: dict = {"exit_codes": {str(f.rank): f.returncode for f in workers}} if workers else {}
    crashed = next((f for f in event.failures if own_crash(f)), None)
    if crashed is not None:
        where = {} if crashed.node is None else {"node": crashed.node, "host": crashed.host}
        fields.update(rank=crashed.rank, **where, exit=describe_returncode(crashed.returncode or 0),
                      **failure_causes.fields(crashed.log_tail))
    return fields


def dendrite_verdict(generation: int, before: int, after: int, files: tuple[str, ...]) -> tuple[str, dict]:
    """("dendrites_added" | "dendrites_rejected", fields) for a generation that wrote `files` (switch_*.pt), from the
    dendrite count before and after it (savefmt.pai_files.dendrites, read once its workers are gone: PerforatedAI writes
    param_counts.csv after the switch file). A switch file without more dendrites is PerforatedAI rejecting them: the
    validation score did not improve, so it kept the model from before them and wrote (or rewrote) the switch file."""
    fields = dict(generation=generation, dendrites=after, switch_files=list(files))
    if after > before:
        return log_events.DENDRITES_ADDED, {**fields, "added": after - before}
    hint = ("PerforatedAI kept no new dendrite (the validation score did not improve with them) and wrote the switch "
            "file to go on from the model it kept")
    return log_events.DENDRITES_REJECTED, {**fields, **({"taken_back": before - after} if after < before else {}),
                                           "hint": hint}


def phase_status(state: State, policy: Policy, dendrites: int | None = None) -> str:
    """One line for `systemctl status`: what the run is doing now (and the dendrites so far, as status counts them)."""
    if state.phase is Phase.INIT:
        return "init run (--perforate_model_parallel)"
    if state.phase is Phase.ADOPTING:
        return "moving into the save folder the init run wrote to"
    if state.phase is Phase.TRAINING:
        retry = f" (after {state.failures} failed attempt(s))" if state.failures else ""
        grown = "" if dendrites is None else f"; {dendrites} dendrite{'' if dendrites == 1 else 's'}"
        return f"generation {state.generation} running{retry}{grown}"
    if state.phase is Phase.SETTLING:
        return "every worker exited 0; waiting for the shared save folder to show their files"
    if state.phase is Phase.BACKOFF:
        return f"retrying after failure {state.failures} of {policy.max_failures}: {state.reason}"
    if state.phase is Phase.STOPPING:
        return f"stopping: {state.reason}"
    if state.phase is Phase.DONE:
        return f"finished with exit code {state.exit_code}: {state.reason}"
    return "starting"


def agent_started_line(raw: AgentStarted) -> tuple[bool, str, dict]:
    """(whether it is a warning, the event, its fields) for an agent's account of itself: ready with warm or cold
    workers, warm workers refused and why, or its forkserver restarted."""
    facts = raw.facts
    if raw.restarted_why:
        return True, log_events.FORKSERVER_RESTARTED, dict(
            agent_pid=raw.agent_pid, forkserver_pid=facts.forkserver, reason=raw.restarted_why,
            hint="the agent started a new forkserver, which passed the self-check")
    if raw.went_cold:
        return True, log_events.WARM_WORKERS_REFUSED, dict(agent_pid=raw.agent_pid, workers="cold", reason=facts.why)
    if facts.warm:
        return False, log_events.AGENT_READY, dict(
            agent_pid=raw.agent_pid, workers="warm", preloaded=",".join(facts.preloaded),
            forkserver_pid=facts.forkserver, took_s=facts.took_s, **_versions(facts),
            **({"not_preloaded": ",".join(facts.missing)} if facts.missing else {}),
            **({"fell_back": facts.why} if facts.why else {}))
    if facts.why == "--cold":
        return False, log_events.AGENT_READY, dict(agent_pid=raw.agent_pid, workers="cold", took_s=facts.took_s,
                                                   **_versions(facts))
    return True, log_events.WARM_WORKERS_REFUSED, dict(
        agent_pid=raw.agent_pid, workers="cold", reason=facts.why,
        hint="every worker starts as a fresh interpreter; --cold says so without the check")


def agent_exit_fields(raw: AgentGone) -> dict:
    """How an agent that left ended: its pid, its exit in words, and the reason it gave."""
    fields = {"agent_pid": raw.agent_pid, "exit": describe_returncode(raw.returncode)}
    if raw.why:
        fields["reason"] = raw.why
    return fields


def _versions(facts: AgentReady) -> dict:
    """The torch and Python the agent runs, as it reported them."""
    return {key: value for key, value in (("torch", facts.torch), ("python", facts.python)) if value}
