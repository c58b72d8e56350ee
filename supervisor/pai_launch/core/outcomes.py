"""What the end of a generation leads to: the next generation, a retry after a backoff, or the end of the run.

Part of the state machine (machine.py dispatches here): pure, like it.
"""

from __future__ import annotations

from dataclasses import replace

from pai_launch.core import exitcodes, repeats
from pai_launch.core.actions import Action, KillRun, RecheckProgress, ReportRunaway, ScheduleRetry
from pai_launch.core.events import GenerationEnded, GenerationRefused, ProgressRechecked
from pai_launch.core.failure import Failure
from pai_launch.core.state import (
    STALL_SIGNAL,
    Phase,
    Policy,
    State,
    StopCause,
    finish,
    finish_stopping,
    start_generation,
    stopping_to_retry,
)
from pai_launch.wire import failure_causes, failure_phase


def on_generation_refused(policy: Policy, state: State, event: GenerationRefused) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        return finish_stopping(state)
    if state.phase not in (Phase.TRAINING, Phase.INIT):  # the init run or a generation was not started
        return state, []
    return finish(state, exitcodes.SAVE_FOLDER, event.reason)


def judge_generation(policy: Policy, event: GenerationEnded) -> tuple[int | None, str]:
    """(exit code, reason) for a generation that did not fail, or (None, reason) to start the next one."""
    if event.complete:
        return exitcodes.COMPLETE, "training complete"
    if policy.data_parallel:
        return exitcodes.COMPLETE, "training process exited 0"
    if event.progressed:
        return None, f"dendrites added ({', '.join(event.progressed)})"
    reason = "every worker exited 0 without writing a switch_*.pt or .training_complete: the script made no progress"
    return exitcodes.NO_PROGRESS, reason


def trained(state: State, event: GenerationEnded) -> bool:
    """Training was reached: a training write to the save folder, a switch file, or a rank whose output shows it
    failed in training (a first epoch may end before any write, as in add_validation_score)."""
    return state.current.reached_training or bool(event.progressed) \
        or any(f.phase() is failure_phase.Phase.TRAINING for f in event.failures)


def _on_failure(policy: Policy, state: State, failure: Failure, event: GenerationEnded,
                reached_training: bool) -> tuple[State, list[Action]]:
    """Retry from the newest valid checkpoint with exponential backoff, within this invocation's failure budget; a
    switch file proven unloadable is moved aside by the retry."""
    count = (0 if event.progressed else state.failures) + 1
    desc = failure.describe()
    if event.progressed:
        state = repeats.forgotten(state)
    unloadable, proof, state = unloadable_switch(state, event, reached_training)
    if proof:
        state = replace(state, unloadable=unloadable, unloadable_why=proof, quarantined=state.quarantined + 1)
        desc += f"; {unloadable or 'the switch file it was started from'} cannot be loaded ({proof})"
        if state.quarantined >= policy.max_failures:
            reason = (f"gave up: {state.quarantined} switch file(s) the script wrote could not be loaded; last: {desc}")
            return finish(replace(state, failures=count), exitcodes.BUDGET_EXHAUSTED, reason)
    if policy.data_parallel and not policy.retry_data_parallel:
        reason = (f"{desc}; DataParallel training has no resume, so it is not retried "
                  f"(pass --max-failures N to retry it from the start)")
        return finish(replace(state, failures=count), failure.exit_code(), reason)
    repeated = None if proof else repeats.repeat_reason(policy, state, failure, reached_training)
    if repeated is not None:
        return finish(replace(state, failures=count), failure.exit_code(), repeated)
    if count >= policy.max_failures:
        reason = f"gave up after {count} consecutive failed generation(s) without progress; last: {desc}"
        return finish(replace(state, failures=count), exitcodes.BUDGET_EXHAUSTED, reason)
    delay = min(policy.backoff_initial * 2 ** (count - 1), policy.backoff_max)
    if proof:
        desc += ": it is moved aside and the run resumes from the switch file before it"
    if policy.data_parallel:
        desc = f"{desc}; retrying DataParallel training from the start (it has no resume)"
    waiting = replace(repeats.remembered(state, failure, reached_training).with_current(retry_at=event.now + delay),
                      phase=Phase.BACKOFF, failures=count, reason=desc)
    return waiting, [ScheduleRetry(delay, count, desc)]


def unloadable_switch(state: State, event: GenerationEnded, reached_training: bool) -> tuple[str | None, str, State]:
    """(the switch file to move aside, the proof, the state) after a failed generation; ("", None) without proof.

    Only evidence moves a file: a rank failed in loading it with an error that says the file is bad (its own output
    says so, whatever the save folder's writes suggest: on every node alike, though only node 0 knows the file for
    sure); or a rank failed in loading it the same way twice from the same file, before training. Anything else (a
    process group that timed out, a config race in perforate_model, a crash in training) leaves it where it is,
    however many ranks failed."""
    loaded = event.loaded_from
    if event.progressed:
        return None, "", replace(state, load_suspect=None)
    for failure in event.failures:
        proof = failure.unloadable()
        if proof is not None:
            return loaded, f"rank {failure.rank}: {proof}", replace(state, load_suspect=None)
    loading = [f for f in event.failures if f.phase() is failure_phase.Phase.LOAD]
    if reached_training or loaded is None or not loading:
        return None, "", replace(state, load_suspect=None)
    suspect = (loaded, loading[0].signature())
    if state.load_suspect == suspect:
        line = failure_causes.explaining_line(loading[0].log_tail)
        return loaded, f"rank {loading[0].rank} failed loading it twice the same way: {line}", \
            replace(state, load_suspect=None)
    return None, "", replace(state, load_suspect=suspect)


def _stall_failure(policy: Policy, state: State, failure: Failure | None) -> Failure:
    """The stall as the cause, also when the workers then died of the stall's own SIGUSR1."""
    current = state.current
    if current.stop is not None and current.stop.cause is StopCause.STALL:
        return Failure.stall(state.reason)
    idle = (current.stall_stop_at or 0.0) - policy.stall_dump_wait - (current.last_activity or 0.0)
    after = f" ({failure.describe()} after {STALL_SIGNAL.name})" if failure is not None else ""
    return Failure.stall(f"stalled: no write to the save folder for {idle:.0f} s{after}")


def _on_hung_agent_end(policy: Policy, state: State, event: GenerationEnded) -> tuple[State, list[Action]]:
    """The hung agent's generation ended: a failure to retry. An agent that ended it without being killed (its request
    was withdrawn before it took it) is killed now, so that the retry gets a new one."""
    hung = Failure.agent(f"{state.reason}; it was killed, and the next generation gets a new one")
    killed = state.current.stop.killed
    after, actions = _on_failure(policy, state, hung, event, trained(state, event))
    if killed:
        return after, actions
    return replace(after, agent_started=False), [KillRun(), *actions]


def _complete(state: State, event: GenerationEnded) -> bool:
    """Training is complete: the marker was seen, during the generation or at its end. Nothing trains after it."""
    return event.complete or state.marker_seen


def on_progress_rechecked(policy: Policy, state: State, event: ProgressRechecked) -> tuple[State, list[Action]]:
    """The second look while a shared file system settles: the generation is judged again once progress or the
    marker shows, or once the settle deadline passed (then without another look)."""
    if state.phase is not Phase.SETTLING:
        return state, []
    if not (event.progressed or event.complete) and event.now < (state.current.settle_deadline or 0.0):
        return state, []
    ended = GenerationEnded(complete=event.complete, progressed=event.progressed, now=event.now)
    return _judge_ended(policy, replace(state, phase=Phase.TRAINING), ended, second_look=True)


def on_generation_ended(policy: Policy, state: State, event: GenerationEnded) -> tuple[State, list[Action]]:
    return _judge_ended(policy, state, event, second_look=False)


def _judge_ended(policy: Policy, state: State, event: GenerationEnded, second_look: bool) -> tuple[State, list[Action]]:
    if event.fatal is not None and state.phase in (Phase.TRAINING, Phase.STOPPING):
        return finish(state, exitcodes.SAVE_FOLDER, event.fatal)
    if event.stopped is not None and (state.phase is Phase.TRAINING or stopping_to_retry(state)):
        stop = event.stopped
        # Another node got --requeue-on's signal first: the job is still to be requeued (by node 0).
        state = replace(state, requeue=state.requeue or stop.signum == policy.requeue_on,
                        stopped_by=state.stopped_by or stop.reason)
        return finish(state, exitcodes.for_signal(stop.signum), f"the job was stopped: {stop.reason}")
    if stopping_to_retry(state) and _complete(state, event):
        return finish(state, exitcodes.COMPLETE, "training complete; workers still running after it were stopped")
    if state.phase is Phase.STOPPING:
        if state.current.stop.cause is StopCause.STALL:
            return _on_failure(policy, state, _stall_failure(policy, state, None), event, reached_training=True)
        if state.current.stop.cause is StopCause.AGENT_HUNG:
            return _on_hung_agent_end(policy, state, event)
        return finish_stopping(state)
    if state.phase is not Phase.TRAINING:
        return state, []
    state, noted = _count_dendrites(state, event)
    if event.progressed:
        state = replace(state, last_switch=event.progressed[-1])
    if _complete(state, event):
        return finish(state, exitcodes.COMPLETE, "training complete")
    failure = event.failures[0] if event.failures else None
    if failure is not None and state.current.stall_stop_at is not None:
        return _on_failure(policy, state, _stall_failure(policy, state, failure), event, reached_training=True)
    if failure is not None:
        return _on_failure(policy, state, failure, event, trained(state, event))
    code, reason = judge_generation(policy, event)
    if code == exitcodes.NO_PROGRESS and not second_look and policy.fs_settle > 0:
        # Every worker exited 0 and no progress shows: a switch file written on another node may show up late.
        settling = state.with_current(settle_deadline=event.now + policy.fs_settle)
        return replace(settling, phase=Phase.SETTLING), [RecheckProgress()]
    if code == exitcodes.NO_PROGRESS and policy.fs_settle > 0:
        reason += f" (the save folder was watched {policy.fs_settle:g} s more for another node's files to show up)"
    if code is not None:
        return finish(state, code, reason)
    limit = reached_limit(policy, state)
    if limit is not None:
        done, actions = finish(state, exitcodes.COMPLETE, limit)
        return done, noted + actions
    progressed = replace(repeats.forgotten(state), failures=0)
    nxt, actions = start_generation(progressed, event.now)
    return nxt, noted + actions


def _count_dendrites(state: State, event: GenerationEnded) -> tuple[State, list[Action]]:
    """The recorded dendrite count (it never goes down), and ReportRunaway once when it passes the maximum the
    script's settings allow."""
    if event.dendrites is None:
        return state, []
    state = replace(state, dendrites=max(state.dendrites, event.dendrites))
    most = event.max_dendrites
    if most is None or state.dendrites <= most or state.runaway_named:
        return state, []
    return replace(state, runaway_named=True), [ReportRunaway(state.dendrites, most, event.max_from)]


def reached_limit(policy: Policy, state: State) -> str | None:
    """Why the run stops here at the user's limit (--max-dendrites, --max-generations); None: it goes on."""
    if policy.max_dendrites is not None and state.dendrites >= policy.max_dendrites:
        return (f"stopped after {state.dendrites} dendrite(s): --max-dendrites {policy.max_dendrites} reached "
                f"(training was not complete)")
    if policy.max_generations is not None and state.generation >= policy.max_generations:
        return (f"stopped after {state.generation} generation(s): --max-generations {policy.max_generations} reached "
                f"(training was not complete)")
    return None
