"""When a failed generation that repeats the one before ends the run instead of being retried.

Part of the state machine (outcomes.py asks here): pure. Retrying exists for the transient crashes (an
unsynchronised checkpoint read); a crash that comes back the same way on the same rank is the script's, and
more attempts only spend the failure budget (hours of a GPU job) to show it again.
"""

from __future__ import annotations

from dataclasses import replace

from pai_launch.core.failure import Cause, Failure
from pai_launch.core.state import Policy, State
from pai_launch.wire import crossnode, failure_causes


def retry_can_fix(failure: Failure) -> bool:
    """A failure that says nothing about the script, however often it repeats: the launcher lost one of the run's own
    private files (something cleaned the temporary folder), or pai-launch's own agent failed (it stopped answering,
    its forkserver died); the next generation gets new ones."""
    return failure.cause is Cause.AGENT or (failure.cause is Cause.LAUNCHER
                                            and failure_causes.lost_private_file(failure.detail))


def repeat_reason(policy: Policy, state: State, failure: Failure, reached_training: bool) -> str | None:
    """Why retrying `failure` cannot help (it repeats the failure before it), or None to retry within the budget.

    Before training: the same rank, code and last log line twice (an import error, a bad argument). After training
    started: a rank that crashed the same way twice (a stall or the launcher can be transient), unless --max-failures
    asked for more attempts."""
    if retry_can_fix(failure) or failure.cause is Cause.CHECKPOINT or failure.transient():
        return None  # a race, a slow peer, a busy GPU; a switch file that is no checkpoint: the budget decides
    desc = failure.describe()
    if failure.cause is Cause.LAUNCHER and crossnode.RDZV_TIMEOUT in failure.detail:
        return desc  # the wait for nodes is bounded by --rdzv-timeout: a retry would wait as long again
    if not reached_training:
        if state.early_failure == failure.signature():
            return f"{desc} before training started, exactly as the attempt before: retrying cannot help"
        return None
    if failure.cause is Cause.WORKER and state.trained_failure == failure.cause_signature() \
            and not policy.retry_repeats:
        return (f"{desc} after training started, the same crash as the attempt before: retried once, not again "
                f"(pass --max-failures N to retry it up to N times)")
    return None


def remembered(state: State, failure: Failure, reached_training: bool) -> State:
    """`state` remembering `failure` for the next one to be compared with (only the last failure counts)."""
    if reached_training:
        return replace(state, early_failure=None, trained_failure=failure.cause_signature())
    return replace(state, early_failure=failure.signature(), trained_failure=None)


def forgotten(state: State) -> State:
    """Progress (a switch file) was made: the next failure repeats nothing."""
    return replace(state, early_failure=None, trained_failure=None)
