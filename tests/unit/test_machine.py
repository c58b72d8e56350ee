"""The run's decisions, driven by scripted event histories: no processes, no clock, no files."""

import signal

import pytest

from supervisor import exitcodes
from supervisor.machine import (
    Failure,
    Finish,
    GenerationEnded,
    InitExited,
    KillRun,
    MarkerAppeared,
    Phase,
    Policy,
    SignalReceived,
    SignalRun,
    StartGeneration,
    StartInit,
    Tick,
    judge_generation,
    start,
    step,
)

POLICY = Policy(grace=10.0)
PROGRESS = GenerationEnded(progressed=("switch_2.pt",))


def replay(history, *, needs_init=True, policy=POLICY):
    """Feed events in order; return (final state, every action emitted, including the start's)."""
    state, actions = start(needs_init=needs_init)
    emitted = list(actions)
    for event in history:
        state, actions = step(policy, state, event)
        emitted.extend(actions)
    return state, emitted


def test_full_cycle_init_two_restructures_then_complete():
    state, actions = replay([InitExited(0), PROGRESS, GenerationEnded(progressed=("switch_4.pt",)), GenerationEnded(complete=True)])
    assert actions == [
        StartInit(),
        StartGeneration(1),
        StartGeneration(2),
        StartGeneration(3),
        Finish(exitcodes.COMPLETE, "training complete"),
    ]
    assert state.phase is Phase.DONE and state.exit_code == 0 and state.generation == 3


def test_resume_skips_the_init_run():
    state, actions = replay([GenerationEnded(complete=True)], needs_init=False)
    assert actions[0] == StartGeneration(1)
    assert not any(isinstance(a, StartInit) for a in actions)
    assert state.exit_code == 0


def test_init_failure_stops_with_exit_3_and_starts_no_workers():
    state, actions = replay([InitExited(2, log_tail="error: unrecognized arguments")])
    assert state.exit_code == exitcodes.INIT_FAILED
    assert not any(isinstance(a, StartGeneration) for a in actions)
    assert "exit code 2" in actions[-1].reason


def test_init_killed_by_signal_reports_the_signal():
    state, actions = replay([InitExited(-9)])
    assert state.exit_code == exitcodes.INIT_FAILED
    assert "SIGKILL" in actions[-1].reason


def test_init_that_wrote_elsewhere_with_save_name_given_is_a_usage_error():
    state, actions = replay([InitExited(0, save_conflict="wrote to OTHER, not PAI")])
    assert actions[-1] == Finish(exitcodes.USAGE, "wrote to OTHER, not PAI")


def test_init_without_outputs_fails():
    state, _ = replay([InitExited(0, outputs_missing=True)])
    assert state.exit_code == exitcodes.INIT_FAILED


def test_generation_without_progress_stops_with_exit_5():
    state, actions = replay([InitExited(0), GenerationEnded()])
    assert state.exit_code == exitcodes.NO_PROGRESS
    assert "no progress" in actions[-1].reason


def test_worker_failure_exits_with_the_root_cause_code():
    failures = (Failure(rank=1, returncode=7, log_tail="boom"), Failure(rank=0, returncode=-15))
    state, actions = replay([InitExited(0), GenerationEnded(failures=failures)])
    assert state.exit_code == 7
    assert actions[-1].reason == "rank 1 failed with exit code 7"


def test_worker_killed_by_signal_exits_128_plus_signal():
    state, actions = replay([InitExited(0), GenerationEnded(failures=(Failure(rank=0, returncode=-signal.SIGSEGV),))])
    assert state.exit_code == 128 + signal.SIGSEGV
    assert "SIGSEGV" in actions[-1].reason


def test_completion_wins_over_a_failure_in_the_same_generation():
    event = GenerationEnded(failures=(Failure(rank=1, returncode=1),), complete=True)
    assert judge_generation(POLICY, event) == (0, "training complete")


def test_launcher_error_without_worker_result_exits_1():
    state, _ = replay([InitExited(0), GenerationEnded(error="agent died")])
    assert state.exit_code == exitcodes.LAUNCHER_ERROR


def test_data_parallel_exit_0_finishes_without_a_restart():
    policy = Policy(grace=10.0, data_parallel=True)
    state, actions = replay([InitExited(0), GenerationEnded()], policy=policy)
    assert state.exit_code == 0
    assert [a for a in actions if isinstance(a, StartGeneration)] == [StartGeneration(1)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("phase_history", [[], [InitExited(0)], [InitExited(0), PROGRESS]])
def test_stop_signal_in_any_running_phase_forwards_once_and_exits_128_plus_n(signum, phase_history):
    state, actions = replay([*phase_history, SignalReceived(signum, now=100.0)])
    assert state.phase is Phase.STOPPING
    assert actions[-1] == SignalRun(signum)
    state, actions = replay([*phase_history, SignalReceived(signum, now=100.0), GenerationEnded(complete=True)])
    assert actions[-1] == Finish(128 + signum, f"stopped by {signal.Signals(signum).name}")
    assert sum(isinstance(a, SignalRun) for a in actions) == 1


def test_stopping_kills_at_the_grace_deadline_not_before():
    history = [InitExited(0), SignalReceived(signal.SIGTERM, now=100.0), Tick(now=109.9)]
    state, actions = replay(history)
    assert not any(isinstance(a, KillRun) for a in actions)
    state, actions = replay([*history, Tick(now=110.0), Tick(now=111.0)])
    assert sum(isinstance(a, KillRun) for a in actions) == 1
    assert state.exit_code == 143


def test_second_sigint_kills_at_once():
    state, actions = replay([InitExited(0), SignalReceived(signal.SIGINT, 100.0), SignalReceived(signal.SIGINT, 100.5)])
    assert actions[-2:] == [SignalRun(signal.SIGINT), KillRun()]
    assert state.exit_code == 130


def test_second_sigterm_does_not_forward_again():
    _, actions = replay([InitExited(0), SignalReceived(signal.SIGTERM, 100.0), SignalReceived(signal.SIGTERM, 101.0)])
    assert sum(isinstance(a, SignalRun) for a in actions) == 1
    assert not any(isinstance(a, KillRun) for a in actions)


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGUSR2])
def test_usr_signals_are_forwarded_and_supervision_goes_on(signum):
    state, actions = replay([InitExited(0), SignalReceived(signum, 100.0), PROGRESS])
    assert SignalRun(signum) in actions
    assert actions[-1] == StartGeneration(2)
    assert state.phase is Phase.TRAINING


def test_marker_with_lingering_workers_stops_them_after_grace_and_exits_0():
    history = [InitExited(0), MarkerAppeared(now=50.0), Tick(now=59.0)]
    state, actions = replay(history)
    assert state.phase is Phase.TRAINING
    state, actions = replay([*history, Tick(now=60.0)])
    assert actions[-1] == SignalRun(signal.SIGTERM)
    assert state.phase is Phase.STOPPING
    state, actions = replay([*history, Tick(now=60.0), GenerationEnded(failures=(Failure(0, -15),))])
    assert state.exit_code == 0


def test_repeated_marker_events_do_not_move_the_deadline():
    state, _ = replay([InitExited(0), MarkerAppeared(now=50.0), MarkerAppeared(now=55.0)])
    assert state.marker_deadline == 60.0


def test_marker_deadline_resets_for_the_next_generation():
    state, _ = replay([InitExited(0), MarkerAppeared(now=50.0), PROGRESS])
    assert state.marker_deadline is None


def test_events_after_done_are_ignored():
    state, _ = replay([InitExited(3)])
    state2, actions = step(POLICY, state, SignalReceived(signal.SIGTERM, 1.0))
    assert state2 == state and actions == []


def test_signal_during_init_then_init_exit_finishes_with_the_signal_code():
    state, actions = replay([SignalReceived(signal.SIGINT, 1.0), InitExited(-2)])
    assert actions[-1].exit_code == 130
    assert not any(isinstance(a, StartGeneration) for a in actions)
