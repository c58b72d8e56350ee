"""The machine on faults of pai-launch's own: an agent that stops answering its heartbeat, and pai-launch itself
paused (its clock jumped past the loop's tick). Scripted event histories: no processes, no clock, no files."""

import signal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pai_launch.core import exitcodes
from pai_launch.core.actions import (
    Finish,
    KillRun,
    PrepareAgent,
    ReplaceAgent,
    ReportAgentHung,
    ReportStall,
    ScheduleRetry,
    SignalRun,
    StartGeneration,
)
from pai_launch.core.events import AgentLeft, Began, GenerationEnded, InitExited, Resumed, SaveActivity, Tick
from pai_launch.core.failure import Cause, Failure
from pai_launch.core.machine import Phase, Policy, StopCause, start, step
from pai_launch.core.observations import AgentAnswered, SignalReceived
from pai_launch.core.state import HUNG_AGENT_GRACE

pytestmark = pytest.mark.timeout(60)

INIT_OK = InitExited(0, wrote_to="PAI", now=0.0)
HUNG = Policy(grace=30.0, agent_ahead=False, agent_silence=30.0)
STALL = Policy(grace=30.0, agent_ahead=False, stall_timeout=20.0, stall_dump_wait=5.0)
KILLED = Failure.launcher("agent process ended with signal SIGKILL before reporting a result")


def replay(history, *, policy, needs_init=True):
    state = start(save_name="PAI")
    emitted = []
    for event in [Began(needs_init, 0.0), *history]:
        state, actions = step(policy, state, event)
        emitted.extend(actions)
    return state, emitted


def answers(until: float, every: float = 2.0):
    t = every
    while t <= until:
        yield AgentAnswered(1, t)
        yield Tick(t + 0.1)
        t += every


# --- a hung agent -------------------------------------------------------------------------------------------
def test_an_agent_that_keeps_answering_is_never_hung():
    state, actions = replay([INIT_OK, *answers(600.0)], policy=HUNG)
    assert state.phase is Phase.TRAINING
    assert not any(isinstance(a, (ReportAgentHung, KillRun)) for a in actions)


def test_a_silent_agent_is_hung_at_the_bound_its_workers_stopped_then_killed_after_a_short_grace():
    history = [INIT_OK, *answers(10.0), Tick(39.9)]
    state, actions = replay(history, policy=HUNG)
    assert state.phase is Phase.TRAINING  # last answer at 10 s: 29.9 s of silence is not yet too long
    history.append(Tick(40.0))
    state, actions = replay(history, policy=HUNG)
    assert actions[-2:] == [ReportAgentHung(30.0), SignalRun(signal.SIGTERM)]
    assert state.phase is Phase.STOPPING and state.current.stop.cause is StopCause.AGENT_HUNG
    assert state.reason == "pai-launch's agent stopped answering (no answer for 30 s)"
    history.append(Tick(40.0 + HUNG_AGENT_GRACE - 0.1))
    assert KillRun() not in replay(history, policy=HUNG)[1]
    history.append(Tick(40.0 + HUNG_AGENT_GRACE))  # not --grace (30 s): the agent that would report the end is gone
    state, actions = replay(history, policy=HUNG)
    assert actions[-1] == KillRun() and not state.agent_started


def test_the_hung_agents_generation_is_a_failure_retried_with_a_new_agent_within_the_budget():
    policy = Policy(grace=30.0, agent_silence=30.0, max_failures=3)  # agents started ahead, as in a real run
    history = [INIT_OK, Tick(1.0), Tick(31.0), Tick(40.0), GenerationEnded(failures=(KILLED,), now=40.5)]
    state, actions = replay(history, policy=policy)
    assert state.phase is Phase.BACKOFF and state.failures == 1
    (retry,) = [a for a in actions if isinstance(a, ScheduleRetry)]
    assert retry.reason.startswith("pai-launch's agent stopped answering (no answer for 31 s)")
    history.append(Tick(42.0))
    state, actions = replay(history, policy=policy)
    assert actions[-2:] == [PrepareAgent(), StartGeneration(2)]  # the killed agent's successor, then the retry
    assert state.current.agent_heard == 42.0  # a new generation: the new agent's silence counts from its start


def test_a_hung_agent_that_never_took_its_request_is_killed_when_the_withdrawn_generation_ends():
    # Stopped while it started up: its request is withdrawn by the stop, the generation ends without a kill.
    history = [INIT_OK, Tick(30.0), GenerationEnded(now=30.1)]
    state, actions = replay(history, policy=HUNG)
    assert actions[-2:] == [KillRun(), ScheduleRetry(1.0, 1, actions[-1].reason)]
    assert state.phase is Phase.BACKOFF and not state.agent_started
    assert "stopped answering" in actions[-1].reason


def test_a_hung_agent_every_time_is_retried_until_the_budget_not_stopped_as_a_repeat():
    policy = Policy(grace=30.0, agent_ahead=False, agent_silence=30.0, max_failures=3, backoff_initial=1.0)
    history, t = [INIT_OK], 0.0
    for _ in range(3):
        history += [Tick(t + 30.0), Tick(t + 35.0), GenerationEnded(failures=(KILLED,), now=t + 35.0), Tick(t + 60.0)]
        t += 60.0
    state, actions = replay(history, policy=policy)
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED and state.generation == 3
    assert "gave up after 3 consecutive" in state.reason and "stopped answering" in state.reason


def test_a_stop_signal_during_a_hung_agents_stop_ends_the_run_as_stopped():
    history = [INIT_OK, Tick(30.0), SignalReceived(signal.SIGTERM, 31.0), GenerationEnded(failures=(KILLED,), now=35.0)]
    state, actions = replay(history, policy=HUNG)
    assert actions[-1] == Finish(143, "stopped by SIGTERM")


def test_no_heartbeat_is_judged_without_an_agent_or_outside_a_generation():
    off = Policy(grace=30.0, agent_ahead=False)  # DataParallel: no agent, no bound
    state, actions = replay([INIT_OK, Tick(500.0)], policy=off)
    assert state.phase is Phase.TRAINING
    # The init run and a backoff have no agent running a generation: silence there is not judged.
    state, actions = replay([Tick(500.0)], policy=HUNG)
    assert state.phase is Phase.INIT
    crash = GenerationEnded(failures=(Failure.worker(0, 1, "x"),), now=1.0)
    policy = Policy(grace=30.0, agent_ahead=False, agent_silence=30.0, backoff_initial=100.0)
    state, actions = replay([INIT_OK, crash, Tick(50.0)], policy=policy)
    assert state.phase is Phase.BACKOFF and not any(isinstance(a, ReportAgentHung) for a in actions)


def test_a_hung_agent_failure_is_named_as_such():
    failure = Failure.agent("pai-launch's agent stopped answering (no answer for 31 s); it was killed")
    assert failure.cause is Cause.AGENT and failure.describe().startswith("pai-launch's agent stopped answering")
    assert failure.exit_code() == exitcodes.LAUNCHER_ERROR


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.floats(min_value=0.05, max_value=29.9), min_size=1, max_size=40))
def test_any_heartbeat_with_gaps_below_the_bound_never_hangs(gaps):
    history, t = [INIT_OK], 0.0
    for gap in gaps:
        history += [Tick(t + gap - 0.01), AgentAnswered(1, t + gap)]
        t += gap
    state, actions = replay(history, policy=HUNG)
    assert state.phase is Phase.TRAINING and not any(isinstance(a, ReportAgentHung) for a in actions)


# --- pai-launch paused --------------------------------------------------------------------------------------
def test_a_paused_supervisor_that_finds_recent_writes_declares_no_stall():
    # The workers wrote every second; pai-launch was stopped from 10 s to 40 s and saw none of it. On SIGCONT the
    # loop's clock jumped 30 s past its tick, over --stall-timeout 20: the folder, read again, shows a write at 39.5 s.
    history = [INIT_OK, *[e for t in range(1, 11) for e in (SaveActivity(float(t)), Tick(t + 0.1))],
               Resumed(40.0, paused=30.0, last_write=39.5), Tick(40.2), SaveActivity(40.3)]
    state, actions = replay(history, policy=STALL, needs_init=True)
    assert state.phase is Phase.TRAINING and state.current.last_activity == 40.3
    assert not any(isinstance(a, (ReportStall, SignalRun)) for a in actions)


def test_a_paused_supervisor_still_finds_a_real_stall_when_nothing_was_written():
    # Last write at 10 s, resumed at 40 s, and the folder shows that same write: 30 s idle, a stall.
    history = [INIT_OK, SaveActivity(10.0), Resumed(40.0, paused=30.0, last_write=10.0)]
    state, actions = replay(history, policy=STALL)
    assert actions[-2:] == [ReportStall(30.0), SignalRun(signal.SIGUSR1)]


def test_a_plain_tick_after_the_same_gap_would_have_declared_the_false_stall():
    # What the Resumed event guards against: the same history with a Tick instead.
    history = [INIT_OK, *[e for t in range(1, 11) for e in (SaveActivity(float(t)), Tick(t + 0.1))], Tick(40.0)]
    state, actions = replay(history, policy=STALL)
    assert actions[-2:] == [ReportStall(30.0), SignalRun(signal.SIGUSR1)]


def test_a_paused_supervisor_does_not_take_the_agents_silence_meanwhile_for_a_hang():
    policy = Policy(grace=30.0, agent_ahead=False, agent_silence=30.0)
    history = [INIT_OK, *answers(10.0), Resumed(70.0, paused=60.0)]
    state, actions = replay(history, policy=policy)
    assert state.phase is Phase.TRAINING and state.current.agent_heard == 70.0
    assert not any(isinstance(a, ReportAgentHung) for a in actions)
    # But an agent that still does not answer after the pause is hung, the bound after it.
    state, actions = replay([*history, Tick(100.0)], policy=policy)
    assert actions[-2:] == [ReportAgentHung(30.0), SignalRun(signal.SIGTERM)]


def test_resumed_outside_a_generation_is_a_tick():
    crash = GenerationEnded(failures=(Failure.worker(0, 1, "x"),), now=1.0)
    policy = Policy(grace=30.0, agent_ahead=False, backoff_initial=1.0)
    state, actions = replay([INIT_OK, crash, Resumed(40.0, paused=39.0, last_write=None)], policy=policy)
    assert actions[-1] == StartGeneration(2) and state.phase is Phase.TRAINING


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(paused=st.floats(min_value=5.0, max_value=3600.0), written_before=st.floats(min_value=0.0, max_value=19.7))
def test_after_any_pause_a_write_within_the_stall_timeout_prevents_a_stall(paused, written_before):
    resumed = 10.0 + paused
    history = [INIT_OK, SaveActivity(10.0), Resumed(resumed, paused=paused, last_write=resumed - written_before),
               Tick(resumed + 0.2)]
    state, actions = replay(history, policy=STALL)
    assert state.phase is Phase.TRAINING and not any(isinstance(a, ReportStall) for a in actions)


# --- an agent that leaves between generations -----------------------------------------------------------------
def test_an_agent_that_left_holding_the_current_generations_request_is_replaced_by_the_machine():
    state, actions = replay([INIT_OK, AgentLeft(1, 1.0)], policy=HUNG)
    assert state.phase is Phase.TRAINING and actions[-1] == ReplaceAgent(1)


@pytest.mark.parametrize("history", [
    [INIT_OK, AgentLeft(None, 1.0)],  # it held nothing: the next generation starts its own
    [INIT_OK, AgentLeft(7, 1.0)],  # a request for another generation than the current one
    [INIT_OK, SignalReceived(signal.SIGTERM, 1.0), AgentLeft(1, 1.5)],  # the run is stopping
    [AgentLeft(1, 0.5)],  # the init run is running: no generation yet
], ids=["held nothing", "stale generation", "stopping", "during the init run"])
def test_no_new_agent_where_there_is_nothing_it_should_run(history):
    state, actions = replay(history, policy=HUNG)
    assert not any(isinstance(action, ReplaceAgent) for action in actions)
