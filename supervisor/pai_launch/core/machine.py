"""The run's decisions as a pure state machine: step(policy, state, event) -> (state, actions).

Nothing here touches processes, files, signals or the clock: time arrives on events as `now`
(monotonic seconds), deadlines are values in the state, and every counter and flag that decides
anything lives in State: what belongs to one generation (or one stop) in a record of its own that the
next replaces whole. The runner executes the actions and records what State says.

Phases: STARTING -> INIT (the init run) [-> ADOPTING (moving into the folder it really wrote to)]
-> TRAINING (a generation runs) -> [BACKOFF (waiting to retry a failed generation) -> TRAINING ...]
-> STOPPING (processes asked to exit, a deadline armed) -> DONE. A generation's end is judged in
outcomes.py; the vocabulary (Phase, Policy, State) is in state.py.
"""

from __future__ import annotations

import signal
from dataclasses import replace

from pai_launch.core import exitcodes
from pai_launch.wire import failure_causes
from pai_launch.core import outcomes
from pai_launch.core.actions import (
    Action, AdoptSaveFolder, AnnounceStop, KillRun, PrepareAgent, RecheckProgress, ReplaceAgent, ReportAgentHung,
    ReportStall, SignalRun,
)
from pai_launch.core.events import (
    AdoptionRefused, AgentAnswered, AgentLeft, Began, Event, GenerationEnded, GenerationJoined, GenerationRefused, InitExited,
    JobStopSeen, JobStoreLost, MarkerAppeared, Resumed, SaveActivity, SaveFolderAdopted, SaveFolderLost, SignalReceived,
    Tick, WorkersLaunched, WorkersWaiting,
)
from pai_launch.core.state import (  # noqa: F401 - Phase, Policy, State re-exported: the machine's vocabulary
    FORWARD_SIGNALS, FORWARDED_AS, HUNG_AGENT_GRACE, IDLE, RUNNING, STALL_SIGNAL, STOP_SIGNALS, Phase, Policy, State, Stop,
    StopCause, finish, finish_stopping, start_generation, start_init, stop, stopping_to_retry,
)


def start(*, save_name: str, generation: int = 0, failures: int = 0, init_done: bool = False,
          last_switch: str | None = None) -> State:
    """The first state; the counters and flags carry a previous pai-launch's record over (a resume)."""
    return State(save_name=save_name, generation=generation, failures=failures, init_done=init_done, last_switch=last_switch)


def step(policy: Policy, state: State, event: Event) -> tuple[State, list[Action]]:
    if state.phase is Phase.DONE:
        return state, []
    handler = _HANDLERS.get(type(event))
    if handler is None:
        raise TypeError(f"unknown event {event!r}")
    return handler(policy, state, event)


# --- handlers, one per event ------------------------------------------------------------------------
def _on_began(policy: Policy, state: State, event: Began) -> tuple[State, list[Action]]:
    if state.phase is not Phase.STARTING:
        return state, []
    if event.needs_init:
        return start_init(state, event.now)
    return start_generation(state, event.now)


def _on_signal(policy: Policy, state: State, event: SignalReceived) -> tuple[State, list[Action]]:
    signum = event.signum
    ends_run = state.phase is Phase.STOPPING and not stopping_to_retry(state)
    if signum == policy.requeue_on and not state.requeue and not ends_run:
        return _requeue(policy, state, event)
    if signum in FORWARD_SIGNALS:
        forward = state.phase in RUNNING and not policy.signals_reach_workers
        return state, ([SignalRun(signum)] if forward else [])
    if signum not in STOP_SIGNALS:
        return state, []
    if not policy.multi_node or state.announced:
        return _stop_on_signal(policy, state, event)
    # The whole job stops: the other nodes hear of it before this node's processes go.
    announce = AnnounceStop(signum, f"{signal.Signals(signum).name} to node {policy.node_rank}'s pai-launch")
    stopped, actions = _stop_on_signal(policy, replace(state, announced=True), event)
    return stopped, [announce, *actions]


def _requeue(policy: Policy, state: State, event: SignalReceived) -> tuple[State, list[Action]]:
    """Slurm's warning before a time limit or preemption: the workers get it, then the job stops cleanly everywhere
    and is requeued (the runner does that last, once this node's processes are gone)."""
    name = signal.Signals(event.signum).name
    code, reason = exitcodes.for_signal(event.signum), f"{name}: stopped so that Slurm requeues the job"
    state = replace(state, requeue=True, stopped_by=state.stopped_by or f"{name} (requeue)")
    actions: list[Action] = []
    if event.signum in FORWARD_SIGNALS and state.phase in RUNNING and not policy.signals_reach_workers:
        actions.append(SignalRun(event.signum))
    if policy.multi_node and not state.announced:
        state = replace(state, announced=True)
        actions.append(AnnounceStop(event.signum, f"{name} to node {policy.node_rank}'s pai-launch (requeue)"))
    if state.phase in RUNNING:
        stopped, more = stop(policy, state, signal.SIGTERM, event.now, StopCause.SIGNAL, code, reason)
    elif stopping_to_retry(state):  # the stall's stop goes on, and now ends the run (for the requeue)
        stopped, more = replace(_stop_changed(state, cause=StopCause.SIGNAL), exit_code=code, reason=reason), []
    else:
        stopped, more = finish(state, code, reason)
    return stopped, actions + more


def _stop_on_signal(policy: Policy, state: State, event: SignalReceived) -> tuple[State, list[Action]]:
    signum = event.signum
    name = signal.Signals(signum).name
    code = exitcodes.for_signal(signum)
    state = replace(state, stopped_by=state.stopped_by or name)
    if state.phase is Phase.STARTING:
        return finish(state, code, f"stopped by {name} before anything was started")
    if state.phase in IDLE:
        return finish(state, code, f"stopped by {name}")
    if state.phase is Phase.STOPPING:
        if state.current.stop.cause is not StopCause.SIGNAL:
            # A user's signal during another stop: the run now ends as stopped by that signal.
            state = replace(_stop_changed(state, cause=StopCause.SIGNAL), exit_code=code, reason=f"stopped by {name}")
        # A second Ctrl+C means "now": kill without waiting out the grace period.
        if signum == signal.SIGINT:
            return _kill(state)
        return state, []
    return stop(policy, state, FORWARDED_AS.get(signum, signum), event.now, StopCause.SIGNAL, code, f"stopped by {name}")


def _stop_changed(state: State, **changes) -> State:
    return state.with_current(stop=replace(state.current.stop, **changes))


def _kill(state: State) -> tuple[State, list[Action]]:
    """SIGKILL whatever of the run still runs, once per stop; the agent goes down with it."""
    if state.current.stop.killed:
        return state, []
    return replace(_stop_changed(state, killed=True), agent_started=False), [KillRun()]


def _on_tick(policy: Policy, state: State, event: Tick) -> tuple[State, list[Action]]:
    now = event.now
    current = state.current
    if state.phase is Phase.STOPPING:
        if current.stop.killed:
            return state, []
        if now >= current.stop.deadline:
            return _kill(state)
        # Workers that started after the stop signal went out (torch spawns them a moment later) get it too.
        return state, [SignalRun(current.stop.signum, only_new=True)]
    state, actions = _agent_due(policy, state)
    if state.phase is Phase.SETTLING:
        return state, [*actions, RecheckProgress()]
    if state.phase is Phase.BACKOFF:
        if current.retry_at is not None and now >= current.retry_at:
            fresh, started = start_generation(state, now)
            return fresh, actions + started
        return state, actions
    if state.phase is not Phase.TRAINING:
        return state, actions
    if current.marker_deadline is not None and now >= current.marker_deadline:
        reason = "training complete; workers still running after the grace period were stopped"
        return stop(policy, state, signal.SIGTERM, now, StopCause.COMPLETE, exitcodes.COMPLETE, reason)
    if policy.agent_silence is not None and current.agent_heard is not None \
            and now - current.agent_heard >= policy.agent_silence:
        return _agent_hung(policy, state, now)
    if current.stall_stop_at is not None:
        if now >= current.stall_stop_at:
            idle = now - (current.last_activity if current.last_activity is not None else now)
            reason = f"stalled: no write to the save folder for {idle:.0f} s"
            return stop(policy, state, signal.SIGTERM, now, StopCause.STALL, None, reason)
        return state, actions
    if policy.stall_timeout is not None and current.last_activity is not None and not current.workers_waiting \
            and now - current.last_activity >= policy.stall_timeout:
        stalled = state.with_current(stall_stop_at=now + policy.stall_dump_wait)
        return stalled, [*actions, ReportStall(now - current.last_activity), SignalRun(STALL_SIGNAL)]
    return state, actions


def _agent_hung(policy: Policy, state: State, now: float) -> tuple[State, list[Action]]:
    """The agent has not answered for too long (stopped, deadlocked): its workers get SIGTERM and a short grace, then
    the kill takes them and the agent down; the generation fails (outcomes) and the next one gets a new agent."""
    heard = state.current.agent_heard
    silent = now - (heard if heard is not None else now)
    reason = f"pai-launch's agent stopped answering (no answer for {silent:.0f} s)"
    deadline = now + min(policy.grace, HUNG_AGENT_GRACE)
    hung = Stop(StopCause.AGENT_HUNG, signal.SIGTERM, deadline)
    stopping = replace(state.with_current(stop=hung), phase=Phase.STOPPING, exit_code=None, reason=reason)
    return stopping, [ReportAgentHung(silent), SignalRun(signal.SIGTERM)]


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
    return state, [ReplaceAgent(event.holding)]


def _on_resumed(policy: Policy, state: State, event: Resumed) -> tuple[State, list[Action]]:
    """pai-launch itself was paused: before any deadline is judged, the save folder's writes as read again count as
    seen, and the agent's silence counts from now (the heartbeat could not be sent or read meanwhile)."""
    if state.phase is Phase.TRAINING:
        current = state.current
        changes: dict = {}
        if event.last_write is not None and current.last_activity is not None:
            changes["last_activity"] = max(current.last_activity, min(event.last_write, event.now))
        if current.agent_heard is not None:
            changes["agent_heard"] = event.now
        state = state.with_current(**changes)
    return _on_tick(policy, state, Tick(event.now))


def _agent_due(policy: Policy, state: State) -> tuple[State, list[Action]]:
    """Start the node's agent ahead of its first generation, so torch is imported and its forkserver warm by then;
    again after a kill took it down."""
    if not policy.agent_ahead or policy.data_parallel or state.agent_started:
        return state, []
    if state.phase not in (Phase.INIT, Phase.TRAINING, Phase.BACKOFF, Phase.SETTLING):
        return state, []
    return replace(state, agent_started=True), [PrepareAgent()]


def _on_save_activity(policy: Policy, state: State, event: SaveActivity) -> tuple[State, list[Action]]:
    if state.phase is not Phase.TRAINING:
        return state, []
    reached = state.current.reached_training or event.training
    return state.with_current(last_activity=event.now, reached_training=reached), []


def _on_waiting(policy: Policy, state: State, event: WorkersWaiting) -> tuple[State, list[Action]]:
    return (state.with_current(workers_waiting=True), []) if state.phase is Phase.TRAINING else (state, [])


def _on_launched(policy: Policy, state: State, event: WorkersLaunched) -> tuple[State, list[Action]]:
    if state.phase is not Phase.TRAINING:
        return state, []
    last = state.current.last_activity
    return state.with_current(workers_waiting=False, last_activity=max(event.now, last or event.now)), []


def _on_marker(policy: Policy, state: State, event: MarkerAppeared) -> tuple[State, list[Action]]:
    state = replace(state, marker_seen=True)
    if state.phase is Phase.TRAINING and state.current.marker_deadline is None:
        return state.with_current(marker_deadline=event.now + policy.grace), []
    return state, []


def _on_joined(policy: Policy, state: State, event: GenerationJoined) -> tuple[State, list[Action]]:
    """This node's pai-launch may be on another count (it was restarted, or node 0 was): node 0's numbers win."""
    if state.phase is not Phase.TRAINING:
        return state, []
    return replace(state, generation=event.generation, failures=event.failures), []


def _on_save_lost(policy: Policy, state: State, event: SaveFolderLost) -> tuple[State, list[Action]]:
    if state.phase in (*IDLE, Phase.STARTING):
        return finish(state, exitcodes.SAVE_FOLDER, event.reason)
    if state.phase in RUNNING:
        return stop(policy, state, signal.SIGTERM, event.now, StopCause.SAVE_LOST, exitcodes.SAVE_FOLDER, event.reason)
    if stopping_to_retry(state):  # without the save folder there is nothing to retry from
        stopping = _stop_changed(state, cause=StopCause.SAVE_LOST)
        return replace(stopping, exit_code=exitcodes.SAVE_FOLDER, reason=event.reason), []
    return state, []


def _on_store_lost(policy: Policy, state: State, event: JobStoreLost) -> tuple[State, list[Action]]:
    """Without node 0's store no node can rendezvous or agree: the job cannot go on (exit 1)."""
    if state.phase in (*IDLE, Phase.STARTING):
        return finish(state, exitcodes.LAUNCHER_ERROR, event.reason)
    if state.phase in RUNNING:
        return stop(policy, state, signal.SIGTERM, event.now, StopCause.STORE_LOST, exitcodes.LAUNCHER_ERROR, event.reason)
    if stopping_to_retry(state):  # without the store there is nothing to retry with
        stopping = _stop_changed(state, cause=StopCause.STORE_LOST)
        return replace(stopping, exit_code=exitcodes.LAUNCHER_ERROR, reason=event.reason), []
    return state, []


def _on_job_stop_seen(policy: Policy, state: State, event: JobStopSeen) -> tuple[State, list[Action]]:
    """The job was stopped on another node and this node's agent could not hear it: stop as the job did (128+N)."""
    reason = f"the job was stopped: {event.reason}"
    code = exitcodes.for_signal(event.signum)
    stopped = replace(state, requeue=state.requeue or event.signum == policy.requeue_on,
                      stopped_by=state.stopped_by or event.reason)
    if state.phase in (*IDLE, Phase.STARTING):
        return finish(stopped, code, reason)
    if state.phase in RUNNING:
        return stop(policy, stopped, signal.SIGTERM, event.now, StopCause.SIGNAL, code, reason)
    if stopping_to_retry(state):
        return replace(_stop_changed(stopped, cause=StopCause.SIGNAL), exit_code=code, reason=reason), []
    return state, []


def _on_init_exited(policy: Policy, state: State, event: InitExited) -> tuple[State, list[Action]]:
    if state.phase is Phase.STOPPING:
        return finish_stopping(state)
    if state.phase is not Phase.INIT:
        return state, []
    if event.returncode != 0:
        reason = f"init run failed with {exitcodes.describe_returncode(event.returncode)}"
        return finish(state, exitcodes.INIT_FAILED, reason + failure_causes.summary(event.log_tail))
    if event.wrote_to is None:
        reason = "init run exited 0 but wrote no array_dims.csv: the script must call GPA.pai_tracker.save_tracker_settings()"
        return finish(state, exitcodes.INIT_FAILED, reason)
    if event.wrote_to == state.save_name:
        return start_generation(replace(state, init_done=True), event.now)
    if policy.save_name_given:
        reason = (f"the init run wrote its settings to {event.wrote_to}/, not to --save-name {state.save_name}: "
                  f"pass --save-name {event.wrote_to} (or make the script save to {state.save_name})")
        return finish(state, exitcodes.USAGE, reason)
    return replace(state, phase=Phase.ADOPTING), [AdoptSaveFolder(event.wrote_to)]


def _on_adopted(policy: Policy, state: State, event: SaveFolderAdopted) -> tuple[State, list[Action]]:
    if state.phase is not Phase.ADOPTING:
        return state, []
    return start_generation(replace(state, save_name=event.name, init_done=True), event.now)


def _on_adoption_refused(policy: Policy, state: State, event: AdoptionRefused) -> tuple[State, list[Action]]:
    if state.phase is not Phase.ADOPTING:
        return state, []
    return finish(state, exitcodes.USAGE, event.reason)


_HANDLERS = {
    Began: _on_began,
    SignalReceived: _on_signal,
    Tick: _on_tick,
    Resumed: _on_resumed,
    AgentAnswered: _on_agent_answered,
    AgentLeft: _on_agent_left,
    SaveActivity: _on_save_activity,
    WorkersLaunched: _on_launched,
    WorkersWaiting: _on_waiting,
    MarkerAppeared: _on_marker,
    SaveFolderLost: _on_save_lost,
    JobStoreLost: _on_store_lost,
    JobStopSeen: _on_job_stop_seen,
    InitExited: _on_init_exited,
    SaveFolderAdopted: _on_adopted,
    AdoptionRefused: _on_adoption_refused,
    GenerationJoined: _on_joined,
    GenerationRefused: outcomes.on_generation_refused,
    GenerationEnded: outcomes.on_generation_ended,
}
