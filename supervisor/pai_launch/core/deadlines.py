"""What time passing decides, as part of the state machine (machine.py dispatches here): on each Tick, the deadlines
State holds are judged (a stop's grace, a retry's backoff, the marker's grace, the agent's silence, a stall), and
the node's agent is started ahead of its generation. A pause of pai-launch itself (Resumed) is judged the same way,
once what it missed counts as seen. Pure, like the machine.
"""

from __future__ import annotations

import signal
from dataclasses import replace

from pai_launch.core import exitcodes, stops
from pai_launch.core.actions import Action, PrepareAgent, RecheckProgress, ReportAgentHung, ReportStall, SignalRun
from pai_launch.core.events import Resumed, Tick
from pai_launch.core.state import (
    HUNG_AGENT_GRACE,
    STALL_SIGNAL,
    Phase,
    Policy,
    State,
    Stop,
    StopCause,
    start_generation,
    stop,
)


def on_tick(policy: Policy, state: State, event: Tick) -> tuple[State, list[Action]]:
    now = event.now
    current = state.current
    if state.phase is Phase.STOPPING:
        if current.stop.killed:
            return state, []
        if now >= current.stop.deadline:
            return stops.kill(state)
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
    if current.marker_deadline is not None:
        # Training is complete: only the marker's grace runs now, no stall or hung-agent clock (a lingering worker
        # is stopped at the grace, never retried).
        if now >= current.marker_deadline:
            reason = "training complete; workers still running after the grace period were stopped"
            return stop(policy, state, signal.SIGTERM, now, StopCause.COMPLETE, exitcodes.COMPLETE, reason)
        return state, actions
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


def on_resumed(policy: Policy, state: State, event: Resumed) -> tuple[State, list[Action]]:
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
    return on_tick(policy, state, Tick(event.now))


def _agent_due(policy: Policy, state: State) -> tuple[State, list[Action]]:
    """Start the node's agent ahead of its first generation, so torch is imported and its forkserver warm by then;
    again after a kill took it down."""
    if not policy.agent_ahead or policy.data_parallel or state.agent_started:
        return state, []
    if state.phase not in (Phase.INIT, Phase.TRAINING, Phase.BACKOFF, Phase.SETTLING):
        return state, []
    return replace(state, agent_started=True), [PrepareAgent()]
