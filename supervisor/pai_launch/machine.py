"""The run's decisions as a pure state machine: step(policy, state, event) -> (state, actions).

Nothing here touches processes, files, signals or the clock: time arrives on events as `now`
(monotonic seconds), and deadlines are values in the state. The runner executes the actions.

Phases: INIT (the init run) -> TRAINING (a generation runs) -> [BACKOFF (waiting to retry a failed
generation) -> TRAINING ...] -> STOPPING (processes asked to exit, a deadline armed) -> DONE.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, replace
from enum import Enum

from pai_launch import exitcodes

#: Signals that stop the run: forwarded once to every process of the run, then a deadline.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
#: Signals passed on to the workers while supervision goes on (e.g. Slurm's pre-emption warning).
FORWARD_SIGNALS = frozenset({signal.SIGUSR1, signal.SIGUSR2})
#: What a stall sends first, so a script that handles it can dump its stacks before being stopped.
STALL_SIGNAL = signal.SIGUSR1


class Phase(Enum):
    INIT = "init"
    TRAINING = "training"
    BACKOFF = "backoff"
    STOPPING = "stopping"
    DONE = "done"


class StopCause(Enum):
    """Why processes are being stopped: decides what their exit leads to."""

    SIGNAL = "signal"
    COMPLETE = "complete"
    STALL = "stall"
    SAVE_LOST = "save_lost"


@dataclass(frozen=True)
class Policy:
    """What the run was asked to do."""

    grace: float = 30.0
    data_parallel: bool = False
    #: Consecutive failed generations without a new switch file before giving up (exit 4).
    max_failures: int = 3
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    #: Seconds without any write to the save folder while workers run that count as a hang; None: off.
    stall_timeout: float | None = None
    #: After a stall's SIGUSR1, how long workers get to dump their stacks before they are stopped.
    stall_dump_wait: float = 5.0


@dataclass(frozen=True)
class State:
    phase: Phase = Phase.INIT
    generation: int = 0
    exit_code: int | None = None
    reason: str = ""
    stop_cause: StopCause | None = None
    stop_deadline: float | None = None
    killed: bool = False
    marker_deadline: float | None = None
    #: Consecutive failed generations without progress: the failure budget used.
    failures: int = 0
    #: (rank, code, last log line) of the last failure that happened before training was reached.
    early_failure: tuple | None = None
    retry_at: float | None = None
    #: The last write seen in the save folder (or the generation's start), for stall detection.
    last_activity: float | None = None
    stall_stop_at: float | None = None


# Events: facts, named in the past tense.
@dataclass(frozen=True)
class InitExited:
    returncode: int
    log_tail: str = ""
    #: Set by the runner after a clean exit: why the save folder cannot be used (exit 2), if so.
    save_conflict: str | None = None
    #: Set by the runner after a clean exit: the script wrote no array_dims.csv anywhere.
    outputs_missing: bool = False
    now: float = 0.0


@dataclass(frozen=True)
class Failure:
    """Why a generation failed: a rank's exit (rank None: the launcher itself), or a `cause` pai-launch saw."""

    rank: int | None
    returncode: int
    log_tail: str = ""
    cause: str = ""

    def describe(self) -> str:
        if self.cause:
            return self.cause
        what = exitcodes.describe_returncode(self.returncode)
        return f"rank {self.rank} failed with {what}" if self.rank is not None else f"the launcher failed: {self.log_tail}"

    def signature(self) -> tuple:
        """What makes two failures 'the same': rank, code and the last line the rank printed."""
        lines = [line.strip() for line in self.log_tail.splitlines() if line.strip()]
        return (self.rank, self.returncode, lines[-1] if lines else "", self.cause)


@dataclass(frozen=True)
class GenerationEnded:
    #: Failed ranks, root cause first; empty when every worker exited 0.
    failures: tuple[Failure, ...] = ()
    #: The launcher itself failed (agent died, rendezvous error): no worker result.
    error: str | None = None
    complete: bool = False
    #: switch_*.pt files written or rewritten during the generation.
    progressed: tuple[str, ...] = ()
    #: The workers wrote to the save folder beyond start-up (PerforatedAI writes every epoch).
    reached_training: bool = True
    now: float = 0.0


@dataclass(frozen=True)
class MarkerAppeared:
    now: float


@dataclass(frozen=True)
class SaveActivity:
    """Something was written to the save folder."""

    now: float


@dataclass(frozen=True)
class SaveFolderLost:
    """The save folder was removed, became unwritable, or its disk is full."""

    reason: str
    now: float


@dataclass(frozen=True)
class SignalReceived:
    signum: int
    now: float


@dataclass(frozen=True)
class Tick:
    now: float


# Actions: commands, named in the imperative.
@dataclass(frozen=True)
class StartInit:
    pass


@dataclass(frozen=True)
class StartGeneration:
    generation: int


@dataclass(frozen=True)
class SignalRun:
    """Send `signum` to every process of the run (workers or the init run), not to the agent."""

    signum: int


@dataclass(frozen=True)
class KillRun:
    pass


@dataclass(frozen=True)
class ScheduleRetry:
    """Informative: the failed generation is retried after `delay` seconds."""

    delay: float
    failures: int
    reason: str


@dataclass(frozen=True)
class ReportStall:
    """Informative: no save-folder write for `idle` seconds; workers got STALL_SIGNAL."""

    idle: float


@dataclass(frozen=True)
class Finish:
    exit_code: int
    reason: str


Event = InitExited | GenerationEnded | MarkerAppeared | SaveActivity | SaveFolderLost | SignalReceived | Tick
Action = StartInit | StartGeneration | SignalRun | KillRun | ScheduleRetry | ReportStall | Finish


def start(*, needs_init: bool, generation: int = 0, failures: int = 0, now: float = 0.0) -> tuple[State, list[Action]]:
    """The first state: an init run, or straight to the next generation when resuming.

    `generation` and `failures` carry a previous pai-launch's counters over (a resume).
    """
    if needs_init:
        return State(phase=Phase.INIT, generation=generation, failures=failures), [StartInit()]
    nxt = generation + 1
    return State(phase=Phase.TRAINING, generation=nxt, failures=failures, last_activity=now), [StartGeneration(nxt)]


def step(policy: Policy, state: State, event: Event) -> tuple[State, list[Action]]:
    if state.phase is Phase.DONE:
        return state, []
    if isinstance(event, SignalReceived):
        return _on_signal(policy, state, event)
    if isinstance(event, Tick):
        return _on_tick(policy, state, event.now)
    if isinstance(event, SaveActivity):
        return (replace(state, last_activity=event.now) if state.phase is Phase.TRAINING else state), []
    if isinstance(event, MarkerAppeared):
        if state.phase is Phase.TRAINING and state.marker_deadline is None:
            return replace(state, marker_deadline=event.now + policy.grace), []
        return state, []
    if isinstance(event, SaveFolderLost):
        return _on_save_lost(policy, state, event)
    if isinstance(event, InitExited):
        return _on_init_exited(state, event)
    if isinstance(event, GenerationEnded):
        return _on_generation_ended(policy, state, event)
    raise TypeError(f"unknown event {event!r}")


def _finish(state: State, code: int, reason: str) -> tuple[State, list[Action]]:
    return replace(state, phase=Phase.DONE, exit_code=code, reason=reason), [Finish(code, reason)]


def _stop(policy: Policy, state: State, signum: int, now: float, cause: StopCause, code: int | None,
          reason: str) -> tuple[State, list[Action]]:
    stopping = replace(state, phase=Phase.STOPPING, stop_cause=cause, exit_code=code, reason=reason,
                       stop_deadline=now + policy.grace)
    return stopping, [SignalRun(signum)]


def _start_generation(state: State, now: float) -> tuple[State, list[Action]]:
    nxt = state.generation + 1
    fresh = replace(state, phase=Phase.TRAINING, generation=nxt, marker_deadline=None, retry_at=None,
                    last_activity=now, stall_stop_at=None, stop_cause=None)
    return fresh, [StartGeneration(nxt)]


def _on_signal(policy: Policy, state: State, event: SignalReceived) -> tuple[State, list[Action]]:
    signum = event.signum
    if signum in FORWARD_SIGNALS:
        return state, ([SignalRun(signum)] if state.phase in (Phase.INIT, Phase.TRAINING) else [])
    if signum not in STOP_SIGNALS:
        return state, []
    name = signal.Signals(signum).name
    if state.phase is Phase.BACKOFF:
        return _finish(state, exitcodes.for_signal(signum), f"stopped by {name}")
    if state.phase is Phase.STOPPING:
        if state.stop_cause is not StopCause.SIGNAL:
            # A user's signal during another stop: the run now ends as stopped by that signal.
            state = replace(state, stop_cause=StopCause.SIGNAL, exit_code=exitcodes.for_signal(signum),
                            reason=f"stopped by {name}")
        # A second Ctrl+C means "now": kill without waiting out the grace period.
        if signum == signal.SIGINT and not state.killed:
            return replace(state, killed=True), [KillRun()]
        return state, []
    return _stop(policy, state, signum, event.now, StopCause.SIGNAL, exitcodes.for_signal(signum), f"stopped by {name}")


def _on_tick(policy: Policy, state: State, now: float) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        if not state.killed and state.stop_deadline is not None and now >= state.stop_deadline:
            return replace(state, killed=True), [KillRun()]
        return state, []
    if state.phase is Phase.BACKOFF:
        if state.retry_at is not None and now >= state.retry_at:
            return _start_generation(state, now)
        return state, []
    if state.phase is not Phase.TRAINING:
        return state, []
    if state.marker_deadline is not None and now >= state.marker_deadline:
        reason = "training complete; workers still running after the grace period were stopped"
        return _stop(policy, state, signal.SIGTERM, now, StopCause.COMPLETE, exitcodes.COMPLETE, reason)
    if state.stall_stop_at is not None:
        if now >= state.stall_stop_at:
            idle = now - (state.last_activity or now)
            reason = f"stalled: no write to the save folder for {idle:.0f} s"
            return _stop(policy, state, signal.SIGTERM, now, StopCause.STALL, None, reason)
        return state, []
    if policy.stall_timeout is not None and state.last_activity is not None and now - state.last_activity >= policy.stall_timeout:
        stalled = replace(state, stall_stop_at=now + policy.stall_dump_wait)
        return stalled, [ReportStall(now - state.last_activity), SignalRun(STALL_SIGNAL)]
    return state, []


def _on_save_lost(policy: Policy, state: State, event: SaveFolderLost) -> tuple[State, list[Action]]:
    if state.phase is Phase.BACKOFF:
        return _finish(state, exitcodes.SAVE_FOLDER, event.reason)
    if state.phase in (Phase.INIT, Phase.TRAINING):
        return _stop(policy, state, signal.SIGTERM, event.now, StopCause.SAVE_LOST, exitcodes.SAVE_FOLDER, event.reason)
    return state, []


def _on_init_exited(state: State, event: InitExited) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        return _finish(state, state.exit_code if state.exit_code is not None else 0, state.reason)
    if state.phase is not Phase.INIT:
        return state, []
    if event.returncode != 0:
        what = exitcodes.describe_returncode(event.returncode)
        return _finish(state, exitcodes.INIT_FAILED, f"init run failed with {what}")
    if event.save_conflict:
        return _finish(state, exitcodes.USAGE, event.save_conflict)
    if event.outputs_missing:
        reason = "init run exited 0 but wrote no array_dims.csv: the script must call GPA.pai_tracker.save_tracker_settings()"
        return _finish(state, exitcodes.INIT_FAILED, reason)
    return _start_generation(state, event.now)


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


def _first_failure(event: GenerationEnded) -> Failure | None:
    if event.failures:
        return event.failures[0]
    if event.error:
        return Failure(rank=None, returncode=exitcodes.LAUNCHER_ERROR, log_tail=event.error)
    return None


def _on_failure(policy: Policy, state: State, failure: Failure, event: GenerationEnded) -> tuple[State, list[Action]]:
    """Retry from the newest valid checkpoint with exponential backoff, within the failure budget."""
    count = (0 if event.progressed else state.failures) + 1
    desc = failure.describe()
    signature = failure.signature()
    if not event.reached_training and state.early_failure == signature:
        code = exitcodes.from_returncode(failure.returncode) or exitcodes.LAUNCHER_ERROR
        reason = f"{desc} before training started, exactly as the attempt before: retrying cannot help"
        return _finish(replace(state, failures=count), code, reason)
    if count >= policy.max_failures:
        reason = f"gave up after {count} consecutive failed generation(s) without progress; last: {desc}"
        return _finish(replace(state, failures=count), exitcodes.BUDGET_EXHAUSTED, reason)
    delay = min(policy.backoff_initial * 2 ** (count - 1), policy.backoff_max)
    waiting = replace(state, phase=Phase.BACKOFF, failures=count, retry_at=event.now + delay, reason=desc,
                      early_failure=None if event.reached_training else signature, stop_cause=None,
                      marker_deadline=None, stall_stop_at=None)
    return waiting, [ScheduleRetry(delay, count, desc)]


def _on_generation_ended(policy: Policy, state: State, event: GenerationEnded) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        if state.stop_cause is StopCause.STALL:
            stall = Failure(rank=None, returncode=exitcodes.BUDGET_EXHAUSTED, cause=state.reason)
            return _on_failure(policy, state, stall, replace(event, reached_training=True))
        return _finish(state, state.exit_code if state.exit_code is not None else 0, state.reason)
    if state.phase is not Phase.TRAINING:
        return state, []
    if event.complete:
        return _finish(state, exitcodes.COMPLETE, "training complete")
    failure = _first_failure(event)
    if failure is not None and state.stall_stop_at is not None:
        # The workers died after the stall's SIGUSR1 (a script without a handler dies of it): the stall is the
        # cause, not the signal we sent ourselves.
        idle = state.stall_stop_at - policy.stall_dump_wait - (state.last_activity or 0.0)
        cause = f"stalled: no write to the save folder for {idle:.0f} s ({failure.describe()} after {STALL_SIGNAL.name})"
        stall = Failure(rank=None, returncode=exitcodes.BUDGET_EXHAUSTED, cause=cause)
        return _on_failure(policy, state, stall, replace(event, reached_training=True))
    if failure is not None:
        return _on_failure(policy, state, failure, event)
    code, reason = judge_generation(policy, event)
    if code is not None:
        return _finish(state, code, reason)
    return _start_generation(replace(state, failures=0, early_failure=None), event.now)
