"""SIGQUIT stops a run like SIGTERM (the workers get SIGTERM, a grace period, exit 131), and pai-launch's threads'
stacks are there to log."""

from __future__ import annotations

import signal
import threading

import pytest

from pai_launch.core.actions import Finish, KillRun, SignalRun
from pai_launch.core.events import Began, GenerationEnded, InitExited, Tick
from pai_launch.core.machine import Phase, Policy, start, step
from pai_launch.core.observations import SignalReceived
from pai_launch.supervise.children.signals import HANDLED, thread_stacks

pytestmark = pytest.mark.timeout(30)

POLICY = Policy(grace=10.0, agent_ahead=False)


def replay(history):
    state, emitted = start(save_name="PAI"), []
    for event in [Began(True, 0.0), *history]:
        state, actions = step(POLICY, state, event)
        emitted.extend(actions)
    return state, emitted


@pytest.mark.parametrize("phase_history", [[], [InitExited(0, wrote_to="PAI")]], ids=["init", "training"])
def test_sigquit_forwards_sigterm_once_then_exits_131(phase_history):
    state, actions = replay([*phase_history, SignalReceived(signal.SIGQUIT, now=100.0)])
    assert state.phase is Phase.STOPPING and actions[-1] == SignalRun(signal.SIGTERM)
    state, actions = replay([*phase_history, SignalReceived(signal.SIGQUIT, now=100.0), GenerationEnded(complete=True)])
    assert actions[-1] == Finish(131, "stopped by SIGQUIT")
    assert sum(isinstance(a, SignalRun) for a in actions) == 1


def test_sigquit_kills_what_is_left_at_the_grace_deadline():
    state, actions = replay([SignalReceived(signal.SIGQUIT, now=100.0), Tick(now=109.9)])
    assert not any(isinstance(a, KillRun) for a in actions)
    state, actions = replay([SignalReceived(signal.SIGQUIT, now=100.0), Tick(now=110.0)])
    assert actions[-1] == KillRun() and state.exit_code == 131


def test_sigquit_is_handled():
    assert signal.SIGQUIT in HANDLED


def test_the_stacks_name_every_thread_and_where_it_waits():
    release = threading.Event()
    waiter = threading.Thread(target=release.wait, name="waiting-here", daemon=True)
    waiter.start()
    try:
        text = thread_stacks()
    finally:
        release.set()
        waiter.join(5)
    assert "thread MainThread" in text and "thread waiting-here" in text
    assert "test_the_stacks_name_every_thread_and_where_it_waits" in text and "in wait" in text
