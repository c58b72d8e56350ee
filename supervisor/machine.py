"""The run's decisions as a pure state machine: step(policy, state, event) -> (state, actions).

Nothing here touches processes, files, signals or the clock: time arrives on events as `now`
(monotonic seconds), and deadlines are values in the state. The runner executes the actions.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, replace
from enum import Enum

from supervisor import exitcodes

#: Signals that stop the run: forwarded once to every process of the run, then a deadline.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
#: Signals passed on to the workers while supervision goes on (e.g. Slurm's pre-emption warning).
FORWARD_SIGNALS = frozenset({signal.SIGUSR1, signal.SIGUSR2})


class Phase(Enum):
    INIT = "init"
    TRAINING = "training"
    STOPPING = "stopping"
    DONE = "done"


@dataclass(frozen=True)
class Policy:
    """What the run was asked to do."""

    grace: float = 30.0
    data_parallel: bool = False


@dataclass(frozen=True)
class State:
    phase: Phase = Phase.INIT
    generation: int = 0
    exit_code: int | None = None
    reason: str = ""
    stop_deadline: float | None = None
    killed: bool = False
    marker_deadline: float | None = None


# Events: facts, named in the past tense.
@dataclass(frozen=True)
class InitExited:
    returncode: int
    log_tail: str = ""
    #: Set by the runner after a clean exit: why the save folder cannot be used (exit 2), if so.
    save_conflict: str | None = None
    #: Set by the runner after a clean exit: the script wrote no array_dims.csv anywhere.
    outputs_missing: bool = False


@dataclass(frozen=True)
class Failure:
    rank: int
    returncode: int
    log_tail: str = ""


@dataclass(frozen=True)
class GenerationEnded:
    #: Failed ranks, root cause first; empty when every worker exited 0.
    failures: tuple[Failure, ...] = ()
    #: The launcher itself failed (agent died, rendezvous error): no worker result.
    error: str | None = None
    complete: bool = False
    #: switch_*.pt files written or rewritten during the generation.
    progressed: tuple[str, ...] = ()


@dataclass(frozen=True)
class MarkerAppeared:
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
    """Send `signum` once to every process of the run (workers or the init run), not to the agent."""

    signum: int


@dataclass(frozen=True)
class KillRun:
    pass


@dataclass(frozen=True)
class Finish:
    exit_code: int
    reason: str


Event = InitExited | GenerationEnded | MarkerAppeared | SignalReceived | Tick
Action = StartInit | StartGeneration | SignalRun | KillRun | Finish


def start(*, needs_init: bool) -> tuple[State, list[Action]]:
    """The first state: an init run, or straight to generation 1 when resuming."""
    if needs_init:
        return State(phase=Phase.INIT), [StartInit()]
    return State(phase=Phase.TRAINING, generation=1), [StartGeneration(1)]


def step(policy: Policy, state: State, event: Event) -> tuple[State, list[Action]]:
    if state.phase is Phase.DONE:
        return state, []
    if isinstance(event, SignalReceived):
        return _on_signal(policy, state, event)
    if isinstance(event, Tick):
        return _on_tick(policy, state, event.now)
    if isinstance(event, MarkerAppeared):
        if state.phase is Phase.TRAINING and state.marker_deadline is None:
            return replace(state, marker_deadline=event.now + policy.grace), []
        return state, []
    if isinstance(event, InitExited):
        return _on_init_exited(state, event)
    if isinstance(event, GenerationEnded):
        return _on_generation_ended(policy, state, event)
    raise TypeError(f"unknown event {event!r}")


def _finish(state: State, code: int, reason: str) -> tuple[State, list[Action]]:
    return replace(state, phase=Phase.DONE, exit_code=code, reason=reason), [Finish(code, reason)]


def _stop(policy: Policy, state: State, signum: int, now: float, code: int, reason: str) -> tuple[State, list[Action]]:
    stopping = replace(state, phase=Phase.STOPPING, exit_code=code, reason=reason, stop_deadline=now + policy.grace)
    return stopping, [SignalRun(signum)]


def _on_signal(policy: Policy, state: State, event: SignalReceived) -> tuple[State, list[Action]]:
    signum = event.signum
    if signum in FORWARD_SIGNALS:
        return state, ([SignalRun(signum)] if state.phase is not Phase.STOPPING else [])
    if signum not in STOP_SIGNALS:
        return state, []
    if state.phase is Phase.STOPPING:
        # A second Ctrl+C means "now": kill without waiting out the grace period.
        if signum == signal.SIGINT and not state.killed:
            return replace(state, killed=True), [KillRun()]
        return state, []
    name = signal.Signals(signum).name
    return _stop(policy, state, signum, event.now, exitcodes.for_signal(signum), f"stopped by {name}")


def _on_tick(policy: Policy, state: State, now: float) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING and not state.killed and state.stop_deadline is not None and now >= state.stop_deadline:
        return replace(state, killed=True), [KillRun()]
    if state.phase is Phase.TRAINING and state.marker_deadline is not None and now >= state.marker_deadline:
        reason = "training complete; workers still running after the grace period were stopped"
        return _stop(policy, state, signal.SIGTERM, now, exitcodes.COMPLETE, reason)
    return state, []


def _on_init_exited(state: State, event: InitExited) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        return _finish(state, state.exit_code or 0, state.reason)
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
    return replace(state, phase=Phase.TRAINING, generation=1), [StartGeneration(1)]


def judge_generation(policy: Policy, event: GenerationEnded) -> tuple[int | None, str]:
    """(exit code, reason) for a generation's end, or (None, reason) when the next generation should start."""
    if event.complete:
        return exitcodes.COMPLETE, "training complete"
    if event.failures:
        first = event.failures[0]
        what = exitcodes.describe_returncode(first.returncode)
        return exitcodes.from_returncode(first.returncode), f"rank {first.rank} failed with {what}"
    if event.error:
        return exitcodes.LAUNCHER_ERROR, f"launcher error: {event.error}"
    if policy.data_parallel:
        return exitcodes.COMPLETE, "training process exited 0"
    if event.progressed:
        return None, f"dendrites added ({', '.join(event.progressed)})"
    reason = "every worker exited 0 without writing a switch_*.pt or .training_complete: the script made no progress"
    return exitcodes.NO_PROGRESS, reason


def _on_generation_ended(policy: Policy, state: State, event: GenerationEnded) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        return _finish(state, state.exit_code or 0, state.reason)
    if state.phase is not Phase.TRAINING:
        return state, []
    code, reason = judge_generation(policy, event)
    if code is not None:
        return _finish(state, code, reason)
    nxt = state.generation + 1
    return replace(state, generation=nxt, marker_deadline=None), [StartGeneration(nxt)]
