"""The run's decisions as a pure state machine: step(policy, state, event) -> (state, actions).

Nothing here touches processes, files, signals or the clock: time arrives on events as `now`
(monotonic seconds), deadlines are values in the state, and every counter and flag that decides
anything lives in State: what belongs to one generation (or one stop) in a record of its own that the
next replaces whole. The runner executes the actions and records what State says.

Phases: STARTING -> INIT (the init run) [-> ADOPTING (moving into the folder it really wrote to)]
-> TRAINING (a generation runs) -> [BACKOFF (waiting to retry a failed generation) -> TRAINING ...]
-> STOPPING (processes asked to exit, a deadline armed) -> DONE. Here: the table of handlers, one per event, and
what a running generation hears of itself. The start of a run is judged in init_run.py, a stop in stops.py, the
deadlines in deadlines.py, a generation's end in outcomes.py; the vocabulary (Phase, Policy, State) is in state.py.
"""

from __future__ import annotations

from dataclasses import replace

from pai_launch.core import deadlines, exitcodes, init_run, outcomes, stops
from pai_launch.core.actions import (
    Action,
    ReplaceAgent,
    ReportGenerationEnd,
    ReportInitEnd,
    ReportMarkerSeen,
    ReportTrainingReached,
)
from pai_launch.core.events import (
    AdoptionRefused,
    AgentLeft,
    Began,
    Event,
    GenerationEnded,
    GenerationJoined,
    GenerationRefused,
    InitExited,
    JobStopSeen,
    JobStoreLost,
    ProgressRechecked,
    Resumed,
    SaveActivity,
    SaveFolderAdopted,
    SaveFolderLost,
    Tick,
    WorkersLaunched,
    WorkersWaiting,
)
from pai_launch.core.observations import AgentAnswered, MarkerAppeared, SignalReceived
from pai_launch.core.state import (  # noqa: F401 - the machine's vocabulary, re-exported
    Phase,
    Policy,
    State,
    StopCause,
    finish,
)


def start(*, save_name: str, generation: int = 0, failures: int = 0, init_done: bool = False,
          last_switch: str | None = None) -> State:
    """The first state; the counters and flags carry a previous pai-launch's record over (a resume)."""
    return State(save_name=save_name, generation=generation, failures=failures, init_done=init_done,
                 last_switch=last_switch)


def step(policy: Policy, state: State, event: Event) -> tuple[State, list[Action]]:
    if state.phase is Phase.DONE:
        return state, []
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise TypeError(f"unknown event {event!r}")
    after, actions = handler(policy, state, event)
    if isinstance(event, GenerationEnded):  # said first, as the run stood when it ended, whatever follows from it
        actions = [ended_report(state, event), *actions]
    elif isinstance(event, InitExited):
        actions = [ReportInitEnd(event, round(event.now - state.current.started_at, 2), state.stopped_by), *actions]
    return after, actions


def ended_report(state: State, event: GenerationEnded) -> ReportGenerationEnd:
    return ReportGenerationEnd(event, state.generation, round(event.now - state.current.started_at, 2),
                               state.stopped_by, state.reason, state.marker_seen, outcomes.trained(state, event))


# --- a running generation: what it hears of itself ------------------------------------------------------
def _on_agent_answered(policy: Policy, state: State, event: AgentAnswered) -> tuple[State, list[Action]]:
    if state.phase is not Phase.TRAINING or state.current.agent_heard is None:
        return state, []
    return state.with_current(agent_heard=max(event.now, state.current.agent_heard)), []


def _on_agent_left(policy: Policy, state: State, event: AgentLeft) -> tuple[State, list[Action]]:
    """An agent that left between generations with this generation's request untaken: a new agent runs it, unless
    the run is stopping (or over), or the request is for a generation no longer the current one."""
    if event.holding is None or event.holding != state.generation or state.phase is not Phase.TRAINING \
            or state.current.stop is not None:
        return state, []
    return state, [ReplaceAgent(event.holding, event.agent_pid, event.exit, event.reason)]


def _on_save_activity(policy: Policy, state: State, event: SaveActivity) -> tuple[State, list[Action]]:
    if state.phase is not Phase.TRAINING:
        return state, []
    reached = state.current.reached_training or event.training
    said = [] if state.current.reached_training or not reached else \
        [ReportTrainingReached(round(event.now - state.current.started_at, 2))]
    return state.with_current(last_activity=event.now, reached_training=reached), said


def _on_waiting(policy: Policy, state: State, event: WorkersWaiting) -> tuple[State, list[Action]]:
    return (state.with_current(workers_waiting=True), []) if state.phase is Phase.TRAINING else (state, [])


def _on_launched(policy: Policy, state: State, event: WorkersLaunched) -> tuple[State, list[Action]]:
    if state.phase is not Phase.TRAINING:
        return state, []
    last = state.current.last_activity
    return state.with_current(workers_waiting=False, last_activity=max(event.now, last or event.now)), []


def _on_marker(policy: Policy, state: State, event: MarkerAppeared) -> tuple[State, list[Action]]:
    said: list[Action] = [] if state.marker_seen else [ReportMarkerSeen()]
    state = replace(state, marker_seen=True)
    if state.phase is Phase.TRAINING and state.current.marker_deadline is None:
        return state.with_current(marker_deadline=event.now + policy.grace), said
    if state.phase in (Phase.BACKOFF, Phase.SETTLING):  # nothing runs, and nothing is to start after the marker
        state, actions = finish(state, exitcodes.COMPLETE, "training complete")
        return state, [*said, *actions]
    return state, said


def _on_joined(policy: Policy, state: State, event: GenerationJoined) -> tuple[State, list[Action]]:
    """This node's pai-launch may be on another count (it was restarted, or node 0 was): node 0's numbers win."""
    if state.phase is not Phase.TRAINING:
        return state, []
    return replace(state, generation=event.generation, failures=event.failures), []


_HANDLERS = {
    Began: init_run.on_began,
    SignalReceived: stops.on_signal,
    Tick: deadlines.on_tick,
    Resumed: deadlines.on_resumed,
    AgentAnswered: _on_agent_answered,
    AgentLeft: _on_agent_left,
    SaveActivity: _on_save_activity,
    WorkersLaunched: _on_launched,
    WorkersWaiting: _on_waiting,
    MarkerAppeared: _on_marker,
    SaveFolderLost: stops.on_save_lost,
    JobStoreLost: stops.on_store_lost,
    JobStopSeen: stops.on_job_stop_seen,
    InitExited: init_run.on_init_exited,
    SaveFolderAdopted: init_run.on_adopted,
    AdoptionRefused: init_run.on_adoption_refused,
    GenerationJoined: _on_joined,
    GenerationRefused: outcomes.on_generation_refused,
    GenerationEnded: outcomes.on_generation_ended,
    ProgressRechecked: outcomes.on_progress_rechecked,
}
