"""What the end of a generation leads to: the next generation, a retry after a backoff, or the end of the run.

Part of the state machine (machine.py dispatches here): pure, like it.
"""

from __future__ import annotations

from dataclasses import replace

from pai_launch.core import exitcodes, repeats
from pai_launch.core.actions import Action, KillRun, RecheckProgress, ScheduleRetry
from pai_launch.core.events import GenerationEnded, GenerationRefused
from pai_launch.core.failure import Cause, Failure
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


def on_generation_refused(policy: Policy, state: State, event: GenerationRefused) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        return finish_stopping(state)
    if state.phase is not Phase.TRAINING:
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


def _on_failure(policy: Policy, state: State, failure: Failure, event: GenerationEnded,
                reached_training: bool) -> tuple[State, list[Action]]:
    """Retry from the newest valid checkpoint with exponential backoff, within the failure budget."""
    count = (0 if event.progressed else state.failures) + 1
    desc = failure.describe()
    if event.progressed:
        state = replace(repeats.forgotten(state), failures_before_progress=state.failures)
    unloadable = unloadable_switch(state, event, reached_training)
    if unloadable is not None:
        # Like a torn file: moved aside, and the one before resumed. The generation whose only progress it was
        # made none after all, so it counts against the budget too: a script that can never save ends.
        if state.failures == 0 and unloadable == state.last_switch:
            count = state.failures_before_progress + 2
        desc += f"; every rank failed to load {unloadable} before training"
        state = replace(state, unloadable=unloadable)
    if policy.data_parallel and not policy.retry_data_parallel:
        reason = (f"{desc}; DataParallel training has no resume, so it is not retried "
                  f"(pass --max-failures N to retry it from the start)")
        return finish(replace(state, failures=count), failure.exit_code(), reason)
    repeated = repeats.repeat_reason(policy, state, failure, reached_training)
    if repeated is not None:
        return finish(replace(state, failures=count), failure.exit_code(), repeated)
    if count >= policy.max_failures:
        reason = f"gave up after {count} consecutive failed generation(s) without progress; last: {desc}"
        return finish(replace(state, failures=count), exitcodes.BUDGET_EXHAUSTED, reason)
    delay = min(policy.backoff_initial * 2 ** (count - 1), policy.backoff_max)
    if unloadable is not None:
        desc += ": it is moved aside and the run resumes from the switch file before it"
    if policy.data_parallel:
        desc = f"{desc}; retrying DataParallel training from the start (it has no resume)"
    waiting = replace(repeats.remembered(state, failure, reached_training).with_current(retry_at=event.now + delay),
                      phase=Phase.BACKOFF, failures=count, reason=desc)
    return waiting, [ScheduleRetry(delay, count, desc)]


def unloadable_switch(state: State, event: GenerationEnded, reached_training: bool) -> str | None:
    """The switch file to move aside after a failed generation: every rank failed before training, right after being
    started from it (the file is whole by the checkpoint check, but the library cannot load it)."""
    if reached_training or event.progressed or event.all_failed_loading is None:
        return None
    return event.all_failed_loading


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
    after, actions = _on_failure(policy, state, hung, event, state.current.reached_training or bool(event.progressed))
    if killed:
        return after, actions
    return replace(after, agent_started=False), [KillRun(), *actions]


def on_generation_ended(policy: Policy, state: State, event: GenerationEnded) -> tuple[State, list[Action]]:
    if event.fatal is not None and state.phase in (Phase.TRAINING, Phase.STOPPING):
        return finish(state, exitcodes.SAVE_FOLDER, event.fatal)
    if event.stopped is not None and (state.phase is Phase.TRAINING or stopping_to_retry(state)):
        signum, why = event.stopped
        # Another node got --requeue-on's signal first: the job is still to be requeued (by node 0).
        state = replace(state, requeue=state.requeue or signum == policy.requeue_on, stopped_by=state.stopped_by or why)
        return finish(state, exitcodes.for_signal(signum), f"the job was stopped: {why}")
    if event.recheck:  # a second look while a shared file system settles
        if state.phase is not Phase.SETTLING:
            return state, []
        if not (event.progressed or event.complete) and event.now < (state.current.settle_deadline or 0.0):
            return state, []
        state = replace(state, phase=Phase.TRAINING)
    if state.phase is Phase.STOPPING:
        if state.current.stop.cause is StopCause.STALL:
            return _on_failure(policy, state, _stall_failure(policy, state, None), event, reached_training=True)
        if state.current.stop.cause is StopCause.AGENT_HUNG:
            return _on_hung_agent_end(policy, state, event)
        return finish_stopping(state)
    if state.phase is not Phase.TRAINING:
        return state, []
    if event.progressed:
        state = replace(state, last_switch=event.progressed[-1])
    if event.complete:
        return finish(state, exitcodes.COMPLETE, "training complete")
    failure = event.failures[0] if event.failures else None
    if failure is not None and state.current.stall_stop_at is not None:
        return _on_failure(policy, state, _stall_failure(policy, state, failure), event, reached_training=True)
    if failure is not None:
        return _on_failure(policy, state, failure, event, state.current.reached_training or bool(event.progressed))
    code, reason = judge_generation(policy, event)
    if code == exitcodes.NO_PROGRESS and not event.recheck and policy.fs_settle > 0:
        # Every worker exited 0 and no progress shows: a switch file written on another node may show up late.
        settling = state.with_current(settle_deadline=event.now + policy.fs_settle)
        return replace(settling, phase=Phase.SETTLING), [RecheckProgress()]
    if code == exitcodes.NO_PROGRESS and policy.fs_settle > 0:
        reason += f" (the save folder was watched {policy.fs_settle:g} s more for another node's files to show up)"
    if code is not None:
        return finish(state, code, reason)
    progressed = replace(repeats.forgotten(state), failures=0, failures_before_progress=state.failures)
    return start_generation(progressed, event.now)
