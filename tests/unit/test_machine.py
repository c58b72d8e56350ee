"""The run's decisions, driven by scripted event histories: no processes, no clock, no files."""

import signal

import pytest

from pai_launch import exitcodes
from pai_launch.machine import (
    Failure,
    Finish,
    GenerationEnded,
    InitExited,
    KillRun,
    MarkerAppeared,
    Phase,
    Policy,
    ReportStall,
    SaveActivity,
    SaveFolderLost,
    ScheduleRetry,
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


def test_worker_failure_is_retried_after_a_backoff_from_the_newest_checkpoint():
    failures = (Failure(rank=1, returncode=7, log_tail="boom"), Failure(rank=0, returncode=-15))
    state, actions = replay([InitExited(0), GenerationEnded(failures=failures, now=10.0)])
    assert state.phase is Phase.BACKOFF and state.failures == 1 and state.retry_at == 11.0
    assert actions[-1] == ScheduleRetry(1.0, 1, "rank 1 failed with exit code 7")
    state, actions = replay([InitExited(0), GenerationEnded(failures=failures, now=10.0), Tick(10.9), Tick(11.0)])
    assert actions[-1] == StartGeneration(2) and state.phase is Phase.TRAINING


def test_backoff_doubles_and_is_capped():
    policy = Policy(max_failures=10, backoff_initial=1.0, backoff_max=5.0)
    history = [InitExited(0)]
    delays = []
    now = 0.0
    for attempt in range(5):
        history.append(GenerationEnded(failures=(Failure(0, 1, f"line {attempt}"),), now=now))
        _, actions = replay(history, policy=policy)
        delays.append(actions[-1].delay)
        now += 100.0
        history.append(Tick(now))
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_budget_exhausted_exits_4_naming_the_last_failure():
    crash = lambda n, t: GenerationEnded(failures=(Failure(1, 7, f"Traceback {n}"),), now=t)  # noqa: E731
    state, actions = replay([InitExited(0), crash(1, 0.0), Tick(5.0), crash(2, 10.0), Tick(20.0), crash(3, 30.0)])
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED == 4
    assert "3 consecutive" in actions[-1].reason and "rank 1 failed with exit code 7" in actions[-1].reason


def test_a_generation_that_wrote_a_switch_file_resets_the_budget():
    crash = lambda t, progressed=(): GenerationEnded(failures=(Failure(0, 1, "x"),), progressed=progressed, now=t)  # noqa: E731
    history = [InitExited(0), crash(0.0), Tick(5.0), crash(10.0, ("switch_2.pt",)), Tick(20.0)]
    state, _ = replay(history)
    assert state.failures == 1 and state.phase is Phase.TRAINING
    state, _ = replay([InitExited(0), crash(0.0), Tick(5.0), PROGRESS])
    assert state.failures == 0


def test_identical_failure_before_training_stops_at_once_with_the_workers_code():
    early = GenerationEnded(failures=(Failure(0, 2, "error: unrecognized arguments: --bad"),), reached_training=False, now=0.0)
    state, actions = replay([InitExited(0), early, Tick(5.0), early])
    assert state.exit_code == 2
    assert "retrying cannot help" in actions[-1].reason


def test_a_different_early_failure_is_retried():
    one = GenerationEnded(failures=(Failure(0, 1, "ImportError: a"),), reached_training=False, now=0.0)
    two = GenerationEnded(failures=(Failure(0, 1, "ImportError: b"),), reached_training=False, now=10.0)
    state, _ = replay([InitExited(0), one, Tick(5.0), two])
    assert state.phase is Phase.BACKOFF


def test_worker_killed_by_signal_is_named_with_the_signal():
    failure = Failure(rank=0, returncode=-signal.SIGSEGV)
    state, actions = replay([InitExited(0), GenerationEnded(failures=(failure,))], policy=Policy(max_failures=1))
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED
    assert "SIGSEGV" in actions[-1].reason


def test_completion_wins_over_a_failure_in_the_same_generation():
    event = GenerationEnded(failures=(Failure(rank=1, returncode=1),), complete=True)
    assert judge_generation(POLICY, event) == (0, "training complete")


def test_launcher_error_without_worker_result_counts_as_a_failure():
    state, actions = replay([InitExited(0), GenerationEnded(error="agent died")])
    assert state.phase is Phase.BACKOFF and "agent died" in actions[-1].reason


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


def test_signal_during_backoff_finishes_at_once():
    crash = GenerationEnded(failures=(Failure(0, 1, "x"),), now=0.0)
    state, actions = replay([InitExited(0), crash, SignalReceived(signal.SIGTERM, 0.5)])
    assert actions[-1] == Finish(143, "stopped by SIGTERM")


def test_stall_sends_usr1_then_stops_and_counts_as_a_failure():
    policy = Policy(grace=10.0, stall_timeout=60.0, stall_dump_wait=5.0)
    history = [InitExited(0, now=0.0), SaveActivity(now=30.0), Tick(89.0)]
    state, actions = replay(history, policy=policy)
    assert not any(isinstance(a, ReportStall) for a in actions)
    history.append(Tick(90.0))
    state, actions = replay(history, policy=policy)
    assert actions[-2:] == [ReportStall(60.0), SignalRun(signal.SIGUSR1)]
    history.append(Tick(95.0))
    state, actions = replay(history, policy=policy)
    assert actions[-1] == SignalRun(signal.SIGTERM) and state.phase is Phase.STOPPING
    history.append(GenerationEnded(failures=(Failure(0, -15), Failure(1, -15)), now=96.0))
    state, actions = replay(history, policy=policy)
    assert state.phase is Phase.BACKOFF and "stalled" in actions[-1].reason


def test_save_activity_keeps_a_long_generation_alive():
    policy = Policy(stall_timeout=60.0)
    history = [InitExited(0, now=0.0)] + [e for t in range(50, 500, 50) for e in (SaveActivity(float(t)), Tick(t + 1.0))]
    state, actions = replay(history, policy=policy)
    assert not any(isinstance(a, ReportStall) for a in actions) and state.phase is Phase.TRAINING


def test_save_folder_lost_stops_the_workers_and_exits_6():
    state, actions = replay([InitExited(0), SaveFolderLost("save folder PAI was removed", 5.0)])
    assert actions[-1] == SignalRun(signal.SIGTERM)
    state, actions = replay([InitExited(0), SaveFolderLost("save folder PAI was removed", 5.0), GenerationEnded()])
    assert actions[-1] == Finish(exitcodes.SAVE_FOLDER, "save folder PAI was removed")


def test_resume_carries_counters_over():
    state, actions = start(needs_init=False, generation=4, failures=2)
    assert actions == [StartGeneration(5)] and state.failures == 2


def test_workers_dying_of_the_stall_signal_count_as_the_stall():
    policy = Policy(grace=10.0, stall_timeout=60.0, stall_dump_wait=5.0)
    history = [InitExited(0, now=0.0), Tick(60.0), GenerationEnded(failures=(Failure(0, -signal.SIGUSR1),), now=61.0)]
    state, actions = replay(history, policy=policy)
    assert state.phase is Phase.BACKOFF
    assert actions[-1].reason.startswith("stalled: no write to the save folder for 60 s")
