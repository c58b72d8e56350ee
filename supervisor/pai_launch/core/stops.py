"""What stops the run, as part of the state machine (machine.py dispatches here): a signal to pai-launch (Slurm's
requeue warning among them), the save folder or the job's store lost, a stop seen on another node; and the kill,
once per stop, when a stop cannot wait. Pure, like the machine.
"""

from __future__ import annotations

import signal
from dataclasses import replace

from pai_launch.core import exitcodes
from pai_launch.core.actions import Action, AnnounceStop, KillRun, SignalRun
from pai_launch.core.events import JobStopSeen, JobStoreLost, SaveFolderLost
from pai_launch.core.observations import SignalReceived
from pai_launch.core.state import (
    FORWARD_SIGNALS,
    FORWARDED_AS,
    IDLE,
    RUNNING,
    STOP_SIGNALS,
    Phase,
    Policy,
    State,
    StopCause,
    finish,
    stop,
    stopping_to_retry,
)


def on_signal(policy: Policy, state: State, event: SignalReceived) -> tuple[State, list[Action]]:
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
            return kill(state)
        return state, []
    return stop(policy, state, FORWARDED_AS.get(signum, signum), event.now, StopCause.SIGNAL, code,
                f"stopped by {name}")


def _stop_changed(state: State, **changes) -> State:
    return state.with_current(stop=replace(state.current.stop, **changes))


def kill(state: State) -> tuple[State, list[Action]]:
    """SIGKILL whatever of the run still runs, once per stop; the agent goes down with it."""
    if state.current.stop.killed:
        return state, []
    return replace(_stop_changed(state, killed=True), agent_started=False), [KillRun()]


def on_save_lost(policy: Policy, state: State, event: SaveFolderLost) -> tuple[State, list[Action]]:
    if state.phase in (*IDLE, Phase.STARTING):
        return finish(state, exitcodes.SAVE_FOLDER, event.reason)
    if state.phase in RUNNING:
        return stop(policy, state, signal.SIGTERM, event.now, StopCause.SAVE_LOST, exitcodes.SAVE_FOLDER, event.reason)
    if stopping_to_retry(state):  # without the save folder there is nothing to retry from
        stopping = _stop_changed(state, cause=StopCause.SAVE_LOST)
        return replace(stopping, exit_code=exitcodes.SAVE_FOLDER, reason=event.reason), []
    return state, []


def on_store_lost(policy: Policy, state: State, event: JobStoreLost) -> tuple[State, list[Action]]:
    """Without node 0's store no node can rendezvous or agree: the job cannot go on (exit 1)."""
    if state.phase in (*IDLE, Phase.STARTING):
        return finish(state, exitcodes.LAUNCHER_ERROR, event.reason)
    if state.phase in RUNNING:
        return stop(policy, state, signal.SIGTERM, event.now, StopCause.STORE_LOST, exitcodes.LAUNCHER_ERROR,
                    event.reason)
    if stopping_to_retry(state):  # without the store there is nothing to retry with
        stopping = _stop_changed(state, cause=StopCause.STORE_LOST)
        return replace(stopping, exit_code=exitcodes.LAUNCHER_ERROR, reason=event.reason), []
    return state, []


def on_job_stop_seen(policy: Policy, state: State, event: JobStopSeen) -> tuple[State, list[Action]]:
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
