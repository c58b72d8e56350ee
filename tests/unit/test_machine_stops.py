"""Stops always finish: whatever came before (a kill, a retry, another stop), a stop signal is followed by SIGKILL
at its grace deadline for whatever still runs, and a second SIGINT kills at once."""

import signal

import pytest

from pai_launch.core import exitcodes
from pai_launch.core.actions import Finish, KillRun, SignalRun, StartGeneration
from pai_launch.core.events import Began, GenerationEnded, JobStopped, SaveFolderLost, Tick
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, start
from pai_launch.core.observations import SignalReceived
from tests.machine_steps import step

#: As `--stall-timeout 3 --grace 2` gives it (the stack dump wait is min(5, grace)); no agent ahead.
POLICY = Policy(grace=2.0, stall_timeout=3.0, stall_dump_wait=2.0, backoff_initial=0.5, agent_ahead=False)
KILLED = GenerationEnded(failures=(Failure.worker(0, -9), Failure.worker(1, -9)), now=7.2)
#: Generation 1 stalls with workers ignoring SIGTERM: SIGUSR1 at 3 s, SIGTERM at 5 s, SIGKILL at 7 s; retried.
STALL_KILLED_THEN_RETRIED = [Tick(3.0), Tick(5.0), Tick(7.0), KILLED, Tick(7.7)]


def replay(history, policy=POLICY):
    state, emitted = start(save_name="PAI", init_done=True), []
    for event in [Began(False, 0.0), *history]:
        state, actions = step(policy, state, event)
        emitted.append(actions)
    return state, emitted


def test_the_reported_history_a_stall_is_killed_and_retried():
    state, emitted = replay(STALL_KILLED_THEN_RETRIED)
    assert emitted[3] == [KillRun()]
    assert emitted[-1] == [StartGeneration(2)] and state.phase is Phase.TRAINING


def test_after_a_kill_and_a_retry_sigterm_is_followed_by_sigkill_at_the_grace_deadline():
    history = [*STALL_KILLED_THEN_RETRIED, SignalReceived(signal.SIGTERM, 9.0), Tick(10.9)]
    state, emitted = replay(history)
    assert emitted[-2] == [SignalRun(signal.SIGTERM)] and KillRun() not in emitted[-1]
    state, emitted = replay([*history, Tick(11.0), Tick(11.2)])
    assert emitted[-2] == [KillRun()] and emitted[-1] == []
    state, emitted = replay([*history, Tick(11.0), GenerationEnded(failures=(Failure.worker(0, -9),), now=11.1)])
    assert emitted[-1] == [Finish(143, "stopped by SIGTERM")]


def test_after_a_kill_and_a_retry_a_second_sigint_kills_at_once():
    history = [*STALL_KILLED_THEN_RETRIED, SignalReceived(signal.SIGINT, 9.0), SignalReceived(signal.SIGINT, 9.1)]
    state, emitted = replay(history)
    assert emitted[-2] == [SignalRun(signal.SIGINT)] and emitted[-1] == [KillRun()]
    assert state.exit_code == 130


@pytest.mark.parametrize("stops", [1, 2, 3])
def test_every_stall_of_a_run_is_killed_at_its_own_deadline(stops):
    # Each generation stalls and ignores SIGTERM: each one's stop ends in its own kill, 2 s after its SIGTERM.
    policy = Policy(grace=2.0, stall_timeout=3.0, stall_dump_wait=2.0, backoff_initial=0.5, max_failures=10,
                    agent_ahead=False)
    state, _ = step(policy, start(save_name="PAI", init_done=True), Began(False, 0.0))
    t, kills = 0.0, 0
    for _ in range(stops):
        for event in (Tick(t + 3.0), Tick(t + 5.0), Tick(t + 6.9), Tick(t + 7.0)):
            state, actions = step(policy, state, event)
            kills += actions.count(KillRun())
        state, _ = step(policy, state, GenerationEnded(failures=(Failure.worker(0, -9),), now=t + 7.1))
        t += 10.0
        state, actions = step(policy, state, Tick(t))
        assert actions == [StartGeneration(state.generation)]
    assert kills == stops


def test_slurms_requeue_signal_during_a_stalls_stop_ends_the_run_for_the_requeue_instead_of_a_retry():
    # Found by the property test: the signal was dropped while stopping, so the stall was retried and the job then
    # ran into Slurm's time limit without being requeued.
    policy = Policy(grace=2.0, stall_timeout=3.0, stall_dump_wait=2.0, agent_ahead=False, requeue_on=signal.SIGUSR1)
    history = [Tick(3.0), Tick(5.0), SignalReceived(signal.SIGUSR1, 5.5)]
    state, emitted = replay(history, policy=policy)
    assert emitted[-1] == [] and state.requeue and state.phase is Phase.STOPPING
    state, emitted = replay([*history, Tick(7.0), KILLED, Tick(8.0)], policy=policy)
    assert emitted[-3] == [KillRun()]
    assert emitted[-2] == [Finish(128 + signal.SIGUSR1, "SIGUSR1: stopped so that Slurm requeues the job")]
    assert emitted[-1] == [] and state.requeue


def test_a_job_wide_stop_during_a_stalls_stop_ends_the_run_instead_of_a_retry():
    # Found by the property test: another node stopped the job while this one stopped its stalled workers, and
    # this node retried the generation alone.
    policy = Policy(grace=2.0, stall_timeout=3.0, stall_dump_wait=2.0, agent_ahead=False, multi_node=True)
    ended = GenerationEnded(failures=(Failure.worker(0, -15),),
                            stopped=JobStopped(signal.SIGTERM, "SIGTERM to node 0's pai-launch"),
                            now=5.5)
    state, emitted = replay([Tick(3.0), Tick(5.0), ended, Tick(8.0)], policy=policy)
    assert emitted[-2] == [Finish(143, "the job was stopped: SIGTERM to node 0's pai-launch")] and emitted[-1] == []


def test_the_save_folder_lost_during_a_stalls_stop_ends_the_run_with_exit_6_instead_of_a_retry():
    # Found by the property test: the loss was ignored while stopping, and the stall's retry started a generation.
    state, emitted = replay([Tick(3.0), Tick(5.0), SaveFolderLost("save folder PAI was removed", 5.5), KILLED,
                             Tick(9.0)])
    assert emitted[-2] == [Finish(exitcodes.SAVE_FOLDER, "save folder PAI was removed")] and emitted[-1] == []
