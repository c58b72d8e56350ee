"""The run's decisions, driven by scripted event histories: no processes, no clock, no files."""

import signal

import pytest

from pai_launch.core import exitcodes
from pai_launch.core.actions import (
    AdoptSaveFolder,
    Finish,
    KillRun,
    PrepareAgent,
    ReportMarkerSeen,
    ReportStall,
    ReportTrainingReached,
    ScheduleRetry,
    SignalRun,
    StartGeneration,
    StartInit,
)
from pai_launch.core.events import (
    AdoptionRefused,
    Began,
    GenerationEnded,
    GenerationRefused,
    InitExited,
    SaveActivity,
    SaveFolderAdopted,
    SaveFolderLost,
    Tick,
    WorkersLaunched,
    WorkersWaiting,
)
from pai_launch.core.failure import Cause, Failure
from pai_launch.core.machine import Phase, Policy, start
from pai_launch.core.observations import MarkerAppeared, SignalReceived
from pai_launch.core.outcomes import judge_generation
from tests.machine_steps import step

#: No agents started ahead unless a test asks: they would add PrepareAgent to every history.
POLICY = Policy(grace=10.0, agent_ahead=False)
PROGRESS = GenerationEnded(progressed=("switch_2.pt",))
INIT_OK = InitExited(0, wrote_to="PAI")


def worker(rank, code, tail=""):
    return Failure.worker(rank, code, tail)


def replay(history, *, needs_init=True, policy=POLICY, state=None):
    """Feed Began, then the events in order; return (final state, every action emitted)."""
    state = state or start(save_name="PAI")
    emitted = []
    for event in [Began(needs_init, 0.0), *history]:
        state, actions = step(policy, state, event)
        emitted.extend(actions)
    return state, emitted


def test_full_cycle_init_two_restructures_then_complete():
    state, actions = replay([INIT_OK, PROGRESS, GenerationEnded(progressed=("switch_4.pt",)),
                             GenerationEnded(complete=True)])
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


def test_init_that_wrote_elsewhere_with_save_name_given_is_a_usage_error_naming_both_folders():
    state, actions = replay([InitExited(0, wrote_to="runs/OTHER")],
                            policy=Policy(adopt_save_folder=False, agent_ahead=False))
    assert state.exit_code == exitcodes.USAGE
    assert "runs/OTHER" in actions[-1].reason and "--save-name PAI" in actions[-1].reason
    assert not any(isinstance(a, (StartGeneration, AdoptSaveFolder)) for a in actions)


def test_init_that_wrote_elsewhere_without_save_name_adopts_that_folder_then_trains():
    state, actions = replay([InitExited(0, wrote_to="OTHER", now=5.0)])
    assert state.phase is Phase.ADOPTING and actions[-1] == AdoptSaveFolder("OTHER")
    state, actions = replay([InitExited(0, wrote_to="OTHER", now=5.0), SaveFolderAdopted("OTHER", 5.1)])
    assert actions[-1] == StartGeneration(1)
    assert state.save_name == "OTHER" and state.init_done


def test_adoption_refused_ends_with_exit_2_and_starts_nothing():
    state, actions = replay([InitExited(0, wrote_to="OTHER"), AdoptionRefused("OTHER is held by PID 7", 1.0)])
    assert actions[-1] == Finish(exitcodes.USAGE, "OTHER is held by PID 7")
    assert not any(isinstance(a, StartGeneration) for a in actions)


def test_save_folder_failing_during_adoption_exits_6():
    state, _ = replay([InitExited(0, wrote_to="OTHER"), SaveFolderLost("cannot move events", 1.0)])
    assert state.exit_code == exitcodes.SAVE_FOLDER


def test_a_signal_during_adoption_finishes_at_once():
    state, actions = replay([InitExited(0, wrote_to="OTHER"), SignalReceived(signal.SIGTERM, 1.0),
                             SaveFolderAdopted("OTHER", 1.1)])
    assert actions[-1] == Finish(143, "stopped by SIGTERM")
    assert not any(isinstance(a, StartGeneration) for a in actions)


def test_init_without_outputs_fails():
    state, _ = replay([InitExited(0, wrote_to=None)])
    assert state.exit_code == exitcodes.INIT_FAILED


def test_generation_without_progress_stops_with_exit_5():
    state, actions = replay([INIT_OK, GenerationEnded()])
    assert state.exit_code == exitcodes.NO_PROGRESS
    assert "no progress" in actions[-1].reason


def test_worker_failure_is_retried_after_a_backoff_from_the_newest_checkpoint():
    failures = (worker(1, 7, "boom"), worker(0, -15))
    state, actions = replay([INIT_OK, GenerationEnded(failures=failures, now=10.0)])
    assert state.phase is Phase.BACKOFF and state.failures == 1 and state.current.retry_at == 11.0
    assert actions[-1] == ScheduleRetry(1.0, 1, "rank 1 failed with exit code 7")
    state, actions = replay([INIT_OK, GenerationEnded(failures=failures, now=10.0), Tick(10.9), Tick(11.0)])
    assert actions[-1] == StartGeneration(2) and state.phase is Phase.TRAINING


def test_backoff_doubles_and_is_capped():
    policy = Policy(max_failures=10, backoff_initial=1.0, backoff_max=5.0)
    history = [INIT_OK]
    delays = []
    now = 0.0
    for attempt in range(5):
        history.append(GenerationEnded(failures=(worker(0, 1, f"line {attempt}"),), now=now))
        _, actions = replay(history, policy=policy)
        delays.append(actions[-1].delay)
        now += 100.0
        history.append(Tick(now))
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_budget_exhausted_exits_4_naming_the_last_failure():
    crash = lambda n, t: GenerationEnded(failures=(worker(1, 7, f"Traceback {n}"),), now=t)  # noqa: E731
    state, actions = replay([INIT_OK, crash(1, 0.0), Tick(5.0), crash(2, 10.0), Tick(20.0), crash(3, 30.0)])
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED == 4
    assert "3 consecutive" in actions[-1].reason and "rank 1 failed with exit code 7" in actions[-1].reason


def test_a_generation_that_wrote_a_switch_file_resets_the_budget():
    crash = lambda t, progressed=(): GenerationEnded(failures=(worker(0, 1, "x"),), progressed=progressed, now=t)  # noqa: E731
    history = [INIT_OK, crash(0.0), Tick(5.0), crash(10.0, ("switch_2.pt",)), Tick(20.0)]
    state, _ = replay(history)
    assert state.failures == 1 and state.phase is Phase.TRAINING
    state, _ = replay([INIT_OK, crash(0.0), Tick(5.0), PROGRESS])
    assert state.failures == 0


def test_identical_failure_before_training_stops_at_once_with_the_workers_code():
    early = GenerationEnded(failures=(worker(0, 2, "error: unrecognized arguments: --bad"),), now=0.0)
    state, actions = replay([INIT_OK, early, Tick(5.0), early])
    assert state.exit_code == 2
    assert "retrying cannot help" in actions[-1].reason


def test_a_different_early_failure_is_retried():
    one = GenerationEnded(failures=(worker(0, 1, "ImportError: a"),), now=0.0)
    two = GenerationEnded(failures=(worker(0, 1, "ImportError: b"),), now=10.0)
    state, _ = replay([INIT_OK, one, Tick(5.0), two])
    assert state.phase is Phase.BACKOFF


def test_worker_killed_by_signal_is_named_with_the_signal():
    failure = worker(0, -signal.SIGSEGV)
    state, actions = replay([INIT_OK, GenerationEnded(failures=(failure,))], policy=Policy(max_failures=1))
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED
    assert "SIGSEGV" in actions[-1].reason


def test_completion_wins_over_a_failure_in_the_same_generation():
    event = GenerationEnded(failures=(worker(1, 1),), complete=True)
    assert judge_generation(POLICY, event) == (0, "training complete")


def test_launcher_error_without_worker_result_counts_as_a_failure():
    state, actions = replay([INIT_OK, GenerationEnded(failures=(Failure.launcher("agent died"),))])
    assert state.phase is Phase.BACKOFF and "agent died" in actions[-1].reason


def test_data_parallel_exit_0_finishes_without_a_restart():
    policy = Policy(grace=10.0, data_parallel=True)
    state, actions = replay([INIT_OK, GenerationEnded()], policy=policy)
    assert state.exit_code == 0
    assert [a for a in actions if isinstance(a, StartGeneration)] == [StartGeneration(1)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("phase_history", [[], [INIT_OK], [INIT_OK, PROGRESS]])
def test_stop_signal_in_any_running_phase_forwards_once_and_exits_128_plus_n(signum, phase_history):
    state, actions = replay([*phase_history, SignalReceived(signum, now=100.0)])
    assert state.phase is Phase.STOPPING
    assert actions[-1] == SignalRun(signum)
    state, actions = replay([*phase_history, SignalReceived(signum, now=100.0), GenerationEnded(complete=True)])
    assert actions[-1] == Finish(128 + signum, f"stopped by {signal.Signals(signum).name}")
    assert sum(isinstance(a, SignalRun) for a in actions) == 1


def test_stopping_kills_at_the_grace_deadline_not_before():
    history = [INIT_OK, SignalReceived(signal.SIGTERM, now=100.0), Tick(now=109.9)]
    state, actions = replay(history)
    assert not any(isinstance(a, KillRun) for a in actions)
    state, actions = replay([*history, Tick(now=110.0), Tick(now=111.0)])
    assert sum(isinstance(a, KillRun) for a in actions) == 1
    assert state.exit_code == 143


def test_second_sigint_kills_at_once():
    state, actions = replay([INIT_OK, SignalReceived(signal.SIGINT, 100.0), SignalReceived(signal.SIGINT, 100.5)])
    assert actions[-2:] == [SignalRun(signal.SIGINT), KillRun()]
    assert state.exit_code == 130


def test_second_sigterm_does_not_forward_again():
    _, actions = replay([INIT_OK, SignalReceived(signal.SIGTERM, 100.0), SignalReceived(signal.SIGTERM, 101.0)])
    assert sum(isinstance(a, SignalRun) for a in actions) == 1
    assert not any(isinstance(a, KillRun) for a in actions)


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGUSR2])
def test_usr_signals_are_forwarded_and_supervision_goes_on(signum):
    state, actions = replay([INIT_OK, SignalReceived(signum, 100.0), PROGRESS])
    assert SignalRun(signum) in actions
    assert actions[-1] == StartGeneration(2)
    assert state.phase is Phase.TRAINING


def test_marker_with_lingering_workers_stops_them_after_grace_and_exits_0():
    history = [INIT_OK, MarkerAppeared(now=50.0), Tick(now=59.0)]
    state, actions = replay(history)
    assert state.phase is Phase.TRAINING
    state, actions = replay([*history, Tick(now=60.0)])
    assert actions[-1] == SignalRun(signal.SIGTERM)
    assert state.phase is Phase.STOPPING
    state, actions = replay([*history, Tick(now=60.0), GenerationEnded(failures=(worker(0, -15),))])
    assert state.exit_code == 0


def test_repeated_marker_events_do_not_move_the_deadline():
    state, _ = replay([INIT_OK, MarkerAppeared(now=50.0), MarkerAppeared(now=55.0)])
    assert state.current.marker_deadline == 60.0


def test_the_marker_is_announced_once_whenever_it_is_seen():
    _, actions = replay([INIT_OK, MarkerAppeared(now=50.0), MarkerAppeared(now=55.0)])
    assert actions.count(ReportMarkerSeen()) == 1
    # Seen while a retry waits: said, then the run finishes.
    failed = GenerationEnded(failures=(worker(1, 1),), now=20.0)
    _, actions = replay([INIT_OK, failed, MarkerAppeared(now=21.0)])
    assert actions[-2:] == [ReportMarkerSeen(), Finish(exitcodes.COMPLETE, "training complete")]


def test_training_reached_is_announced_once_per_generation_at_its_first_training_write():
    started = replay([INIT_OK])[0].current.started_at
    history = [INIT_OK, SaveActivity(started + 1.0, training=False), SaveActivity(started + 2.5),
               SaveActivity(started + 3.0), PROGRESS, SaveActivity(started + 4.0)]
    _, actions = replay(history)
    reached = [a for a in actions if isinstance(a, ReportTrainingReached)]
    assert len(reached) == 2 and reached[0] == ReportTrainingReached(2.5)  # then once in generation 2


def test_no_generation_starts_after_the_marker_even_when_one_ends_with_progress():
    state, actions = replay([INIT_OK, MarkerAppeared(now=50.0), PROGRESS])
    assert state.phase is Phase.DONE and state.exit_code == 0
    assert sum(isinstance(a, StartGeneration) for a in actions) == 1


def test_events_after_done_are_ignored():
    state, _ = replay([InitExited(3)])
    state2, actions = step(POLICY, state, SignalReceived(signal.SIGTERM, 1.0))
    assert state2 == state and actions == []


def test_signal_during_init_then_init_exit_finishes_with_the_signal_code():
    state, actions = replay([SignalReceived(signal.SIGINT, 1.0), InitExited(-2)])
    assert actions[-1].exit_code == 130
    assert not any(isinstance(a, StartGeneration) for a in actions)


def test_signal_during_backoff_finishes_at_once():
    crash = GenerationEnded(failures=(worker(0, 1, "x"),), now=0.0)
    state, actions = replay([INIT_OK, crash, SignalReceived(signal.SIGTERM, 0.5)])
    assert actions[-1] == Finish(143, "stopped by SIGTERM")


def test_stall_sends_usr1_then_stops_and_counts_as_a_failure():
    policy = Policy(grace=10.0, stall_timeout=60.0, stall_dump_wait=5.0)
    history = [INIT_OK, SaveActivity(now=30.0), Tick(89.0)]
    state, actions = replay(history, policy=policy)
    assert not any(isinstance(a, ReportStall) for a in actions)
    history.append(Tick(90.0))
    state, actions = replay(history, policy=policy)
    assert actions[-2:] == [ReportStall(60.0), SignalRun(signal.SIGUSR1)]
    history.append(Tick(95.0))
    state, actions = replay(history, policy=policy)
    assert actions[-1] == SignalRun(signal.SIGTERM) and state.phase is Phase.STOPPING
    history.append(GenerationEnded(failures=(worker(0, -15), worker(1, -15)), now=96.0))
    state, actions = replay(history, policy=policy)
    assert state.phase is Phase.BACKOFF and "stalled" in actions[-1].reason


def test_no_stall_is_counted_while_the_request_waits_for_the_agent_and_the_clock_starts_when_it_is_taken():
    policy = Policy(grace=10.0, stall_timeout=60.0, stall_dump_wait=5.0)
    history = [INIT_OK, WorkersWaiting(1.0), Tick(70.0), Tick(100.0)]
    state, actions = replay(history, policy=policy)
    assert not any(isinstance(a, ReportStall) for a in actions) and state.current.workers_waiting
    history += [WorkersLaunched(100.0), Tick(159.0)]
    state, actions = replay(history, policy=policy)
    assert not any(isinstance(a, ReportStall) for a in actions) and not state.current.workers_waiting
    state, actions = replay([*history, Tick(160.0)], policy=policy)
    assert actions[-2:] == [ReportStall(60.0), SignalRun(signal.SIGUSR1)]


def test_save_activity_keeps_a_long_generation_alive():
    policy = Policy(stall_timeout=60.0)
    history = [INIT_OK] + [e for t in range(50, 500, 50) for e in (SaveActivity(float(t)), Tick(t + 1.0))]
    state, actions = replay(history, policy=policy)
    assert not any(isinstance(a, ReportStall) for a in actions) and state.phase is Phase.TRAINING


def test_save_folder_lost_stops_the_workers_and_exits_6():
    state, actions = replay([INIT_OK, SaveFolderLost("save folder PAI was removed", 5.0)])
    assert actions[-1] == SignalRun(signal.SIGTERM)
    state, actions = replay([INIT_OK, SaveFolderLost("save folder PAI was removed", 5.0), GenerationEnded()])
    assert actions[-1] == Finish(exitcodes.SAVE_FOLDER, "save folder PAI was removed")


def test_resume_carries_counters_over():
    state, actions = replay([], needs_init=False, state=start(save_name="PAI", generation=4, failures=2,
                                                              init_done=True))
    assert actions == [StartGeneration(5)] and state.failures == 2 and state.init_done


def test_workers_dying_of_the_stall_signal_count_as_the_stall():
    policy = Policy(grace=10.0, stall_timeout=60.0, stall_dump_wait=5.0)
    history = [INIT_OK, Tick(60.0), GenerationEnded(failures=(worker(0, -signal.SIGUSR1),), now=61.0)]
    state, actions = replay(history, policy=policy)
    assert state.phase is Phase.BACKOFF
    assert actions[-1].reason.startswith("stalled: no write to the save folder for 60 s")


# --- start-up, refusals, DataParallel, the agent started ahead, late workers ------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_queued_before_the_loop_began_starts_nothing(signum):
    state = start(save_name="PAI")
    state, actions = step(POLICY, state, SignalReceived(signum, 0.0))
    assert actions == [Finish(128 + signum, f"stopped by {signal.Signals(signum).name} before anything was started")]
    state, actions = step(POLICY, state, Began(True, 0.1))
    assert actions == [] and state.phase is Phase.DONE


def test_usr1_before_the_loop_began_is_dropped_and_the_run_starts():
    state, actions = step(POLICY, start(save_name="PAI"), SignalReceived(signal.SIGUSR1, 0.0))
    assert actions == []
    _, actions = step(POLICY, state, Began(True, 0.1))
    assert actions == [StartInit()]


def test_a_generation_refused_by_the_save_folder_exits_6_without_a_generation_end():
    state, actions = replay([INIT_OK, GenerationRefused("the save folder PAI was removed", 1.0)])
    assert actions[-1] == Finish(exitcodes.SAVE_FOLDER, "the save folder PAI was removed")
    assert state.generation == 1


def test_a_refusal_while_stopping_ends_with_the_stop_code():
    state, actions = replay([INIT_OK, SignalReceived(signal.SIGTERM, 1.0), GenerationRefused("removed", 1.1)])
    assert actions[-1] == Finish(143, "stopped by SIGTERM")


def test_data_parallel_failure_stops_with_the_workers_code_unless_retries_were_asked_for():
    crash = GenerationEnded(failures=(worker(0, 9, "CUDA error"),), now=5.0)
    state, actions = replay([INIT_OK, crash], policy=Policy(data_parallel=True, agent_ahead=False))
    assert state.exit_code == 9 and not any(isinstance(a, ScheduleRetry) for a in actions)
    assert "no resume" in actions[-1].reason and "--max-failures" in actions[-1].reason
    state, actions = replay([INIT_OK, crash], policy=Policy(data_parallel=True, retry_data_parallel=True,
                                                            agent_ahead=False))
    assert state.phase is Phase.BACKOFF and "from the start" in actions[-1].reason


def test_start_up_files_do_not_count_as_reaching_training():
    early = GenerationEnded(failures=(worker(0, 1, "JSONDecodeError"),), now=0.0)
    history = [INIT_OK, SaveActivity(0.0, training=False), early, Tick(5.0), SaveActivity(5.5, training=False), early]
    state, actions = replay(history)
    assert state.exit_code == 1 and "retrying cannot help" in actions[-1].reason
    history = [INIT_OK, early, Tick(5.0), SaveActivity(5.5, training=True), early]
    state, _ = replay(history)
    assert state.phase is Phase.BACKOFF  # the same failure, but after training began: retried


def test_a_repeated_early_launcher_failure_exits_1_and_a_signal_death_128_plus_n():
    launcher = GenerationEnded(failures=(Failure.launcher("rendezvous timed out"),), now=0.0)
    state, _ = replay([INIT_OK, launcher, Tick(5.0), launcher])
    assert state.exit_code == exitcodes.LAUNCHER_ERROR
    killed = GenerationEnded(failures=(worker(1, -signal.SIGSEGV),), now=0.0)
    state, _ = replay([INIT_OK, killed, Tick(5.0), killed])
    assert state.exit_code == 128 + signal.SIGSEGV


def test_a_stall_is_a_failure_of_its_own_cause_not_a_fake_exit_code():
    policy = Policy(grace=10.0, stall_timeout=60.0, stall_dump_wait=5.0, max_failures=1, agent_ahead=False)
    history = [INIT_OK, Tick(60.0), Tick(65.0), GenerationEnded(failures=(worker(0, -15), worker(1, -15)), now=66.0)]
    state, actions = replay(history, policy=policy)
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED
    assert "stalled: no write to the save folder for 65 s" in actions[-1].reason and "rank" not in actions[-1].reason


def test_failure_describes_each_cause():
    assert Failure.worker(3, -9).describe() == "rank 3 failed with signal SIGKILL"
    assert Failure.launcher("agent died").describe() == "the launcher failed: agent died"
    assert Failure.stall("stalled: 5 s").cause is Cause.STALL and Failure.stall("stalled: 5 s").describe() == \
        "stalled: 5 s"


def test_the_machine_keeps_the_last_switch_file_written():
    state, _ = replay([INIT_OK, PROGRESS, GenerationEnded(progressed=("switch_4.pt", "switch_6.pt"))])
    assert state.last_switch == "switch_6.pt" and state.generation == 3


def test_the_agent_is_started_once_during_init_and_lives_through_every_generation():
    policy = Policy(grace=10.0)
    state, actions = replay([Tick(1.0), Tick(1.2)], policy=policy)
    assert actions.count(PrepareAgent()) == 1 and state.agent_started
    history = [Tick(1.0), InitExited(0, wrote_to="PAI", now=2.0), Tick(3.0),
               GenerationEnded(progressed=("switch_2.pt",), now=4.0),
               Tick(5.0), GenerationEnded(progressed=("switch_4.pt",), now=6.0), Tick(7.0)]
    state, actions = replay(history, policy=policy)
    assert state.generation == 3 and actions.count(PrepareAgent()) == 1


def test_no_agent_ahead_in_data_parallel_mode_or_when_switched_off():
    for policy in (Policy(data_parallel=True), Policy(agent_ahead=False)):
        _, actions = replay([Tick(1.0), INIT_OK, Tick(10.0)], policy=policy)
        assert PrepareAgent() not in actions


def test_a_kill_takes_the_agent_down_so_the_retry_prepares_a_new_one():
    policy = Policy(grace=1.0, stall_timeout=5.0, stall_dump_wait=1.0)
    history = [INIT_OK, Tick(0.5), Tick(5.0), Tick(6.0), Tick(7.0)]
    state, actions = replay(history, policy=policy)
    assert KillRun() in actions and not state.agent_started
    state, actions = replay([*history, GenerationEnded(failures=(Failure.worker(0, -9),), now=7.5), Tick(8.0)],
                            policy=policy)
    assert state.phase is Phase.BACKOFF and actions[-1] == PrepareAgent() and state.agent_started


def test_workers_that_start_late_get_the_stop_signal_on_every_tick_until_the_kill():
    history = [INIT_OK, SignalReceived(signal.SIGTERM, 100.0), Tick(100.2), Tick(100.4)]
    _, actions = replay(history)
    assert actions[-2:] == [SignalRun(signal.SIGTERM, only_new=True)] * 2
    _, actions = replay([*history, Tick(110.0), Tick(110.2)])
    assert actions[-1] == KillRun()


def test_marker_seen_is_remembered_in_any_running_phase():
    state, _ = replay([INIT_OK, SignalReceived(signal.SIGTERM, 1.0), MarkerAppeared(2.0)])
    assert state.marker_seen and state.current.marker_deadline is None


def test_every_generation_end_is_reported_first_with_the_run_as_it_stood_when_it_ended():
    from pai_launch.core import machine
    from pai_launch.core.actions import ReportGenerationEnd

    state = replay([INIT_OK, SaveActivity(3.0)])[0]
    crashed = GenerationEnded(failures=(worker(1, 3),), now=state.current.started_at + 4.0)
    after, actions = machine.step(POLICY, state, crashed)
    assert actions[0] == ReportGenerationEnd(crashed, generation=1, duration=4.0, stopped_by=None, reason=state.reason,
                                             marker_seen=False, reached_training=True)
    assert isinstance(actions[1], ScheduleRetry) and after.generation == 1
    # Stopped, then ended: the report carries the stop (the state before the end), whatever the machine does next.
    stopping = replay([INIT_OK, SignalReceived(signal.SIGTERM, 5.0)])[0]
    _, actions = machine.step(POLICY, stopping, GenerationEnded(failures=(worker(0, -15),), now=6.0))
    assert actions[0].stopped_by == "SIGTERM" and isinstance(actions[-1], Finish)


def test_the_init_runs_end_is_reported_first_with_its_duration_and_any_stop_asked_for():
    from pai_launch.core import machine
    from pai_launch.core.actions import ReportInitEnd

    began = replay([])[0]
    failed = InitExited(3, "Traceback ...", now=began.current.started_at + 2.5)
    _, actions = machine.step(POLICY, began, failed)
    assert actions == [ReportInitEnd(failed, 2.5, None), Finish(exitcodes.INIT_FAILED, actions[-1].reason)]
    stopped = replay([SignalReceived(signal.SIGTERM, 1.0)])[0]
    _, actions = machine.step(POLICY, stopped, InitExited(-15, now=3.0))
    assert actions[0].stopped_by == "SIGTERM"
