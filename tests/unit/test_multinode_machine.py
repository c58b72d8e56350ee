"""The state machine's multi-node decisions, from scripted histories: a stop here is announced to the job, a
job-wide stop ends this node's run, node 0's generation number wins, a fatal problem is not retried, and "no
progress" waits for a shared file system to settle."""

import signal

from pai_launch.core import exitcodes
from pai_launch.core.actions import AnnounceStop, Finish, RecheckProgress, SignalRun, StartGeneration
from pai_launch.core.events import GenerationEnded, GenerationJoined, JobStopped, ProgressRechecked, Tick
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, start
from pai_launch.core.observations import SignalReceived
from tests.machine_steps import step
from tests.unit.test_machine import replay

MULTI = Policy(grace=10.0, agent_ahead=False, multi_node=True, node_rank=1)
SETTLE = Policy(grace=10.0, agent_ahead=False, multi_node=True, fs_settle=30.0)


def test_a_stop_signal_on_any_node_is_announced_to_the_job_before_the_workers_are_signalled():
    state, actions = replay([SignalReceived(signal.SIGTERM, 1.0)], needs_init=False, policy=MULTI)

    assert actions[1:] == [AnnounceStop(signal.SIGTERM, "SIGTERM to node 1's pai-launch"), SignalRun(signal.SIGTERM)]
    assert state.phase is Phase.STOPPING and state.announced


def test_a_second_stop_signal_is_not_announced_again():
    _, actions = replay([SignalReceived(signal.SIGTERM, 1.0), SignalReceived(signal.SIGINT, 2.0)], needs_init=False,
                        policy=MULTI)

    assert sum(isinstance(a, AnnounceStop) for a in actions) == 1


def test_on_one_machine_nothing_is_announced():
    _, actions = replay([SignalReceived(signal.SIGTERM, 1.0)], needs_init=False, policy=Policy(agent_ahead=False))

    assert not any(isinstance(a, AnnounceStop) for a in actions)


def test_a_stop_from_another_node_ends_this_run_with_that_signals_code_and_no_retry():
    state, actions = replay([GenerationEnded(failures=(Failure.worker(0, -15),),
                                             stopped=JobStopped(signal.SIGTERM, "SIGTERM to node 0's pai-launch"),
                                             now=3.0)],
                            needs_init=False, policy=MULTI)

    assert actions[-1] == Finish(143, "the job was stopped: SIGTERM to node 0's pai-launch")
    assert state.failures == 0


def test_node_0s_generation_number_replaces_this_nodes_own():
    state, _ = replay([], needs_init=False, policy=MULTI, state=start(save_name="PAI", generation=4))
    assert state.generation == 5
    state, _ = step(MULTI, state, GenerationJoined(3, 1.0, failures=2))
    assert (state.generation, state.failures) == (3, 2)
    state, actions = step(MULTI, state, GenerationEnded(progressed=("switch_6.pt",), now=2.0))
    assert actions == [StartGeneration(4)]


def test_a_fatal_problem_ends_the_run_with_exit_6_without_spending_the_budget():
    state, actions = replay([GenerationEnded(fatal="the save folder must be on a file system every node shares",
                                             now=1.0)],
                            needs_init=False, policy=MULTI)

    assert actions[-1] == Finish(exitcodes.SAVE_FOLDER, "the save folder must be on a file system every node shares")
    assert state.failures == 0


def test_no_progress_waits_for_the_shared_folder_then_gives_exit_5():
    state, actions = replay([GenerationEnded(now=10.0)], needs_init=False, policy=SETTLE)
    assert state.phase is Phase.SETTLING and actions[-1] == RecheckProgress()
    state, actions = step(SETTLE, state, Tick(11.0))
    assert actions == [RecheckProgress()]
    state, actions = step(SETTLE, state, ProgressRechecked(now=39.0))
    assert state.phase is Phase.SETTLING and actions == []
    state, actions = step(SETTLE, state, ProgressRechecked(now=40.0))
    assert state.exit_code == exitcodes.NO_PROGRESS and isinstance(actions[-1], Finish)
    assert "watched 30 s more" in state.reason


def test_a_switch_file_that_shows_up_while_settling_starts_the_next_generation():
    state, _ = replay([GenerationEnded(now=10.0)], needs_init=False, policy=SETTLE)
    state, actions = step(SETTLE, state, ProgressRechecked(progressed=("switch_2.pt",), now=12.0))

    assert actions == [StartGeneration(2)] and state.phase is Phase.TRAINING and state.last_switch == "switch_2.pt"


def test_the_marker_that_shows_up_while_settling_completes_the_run():
    state, _ = replay([GenerationEnded(now=10.0)], needs_init=False, policy=SETTLE)
    state, actions = step(SETTLE, state, ProgressRechecked(complete=True, now=12.0))

    assert actions[-1] == Finish(0, "training complete")


def test_a_stop_signal_while_settling_ends_the_run_at_once():
    state, _ = replay([GenerationEnded(now=10.0)], needs_init=False, policy=SETTLE)
    state, actions = step(SETTLE, state, SignalReceived(signal.SIGTERM, 11.0))

    assert state.phase is Phase.DONE and state.exit_code == 143
    assert isinstance(actions[0], AnnounceStop) and isinstance(actions[-1], Finish)


def test_a_recheck_that_arrives_after_settling_ended_is_ignored():
    state, _ = replay([GenerationEnded(progressed=("switch_2.pt",), now=1.0)], needs_init=False, policy=SETTLE)
    after, actions = step(SETTLE, state, ProgressRechecked(now=2.0))

    assert after == state and actions == []


def test_one_machine_without_poll_decides_no_progress_at_once():
    state, actions = replay([GenerationEnded(now=1.0)], needs_init=False, policy=Policy(agent_ahead=False))

    assert state.exit_code == exitcodes.NO_PROGRESS and not any(isinstance(a, RecheckProgress) for a in actions)


# --- Slurm's warning signal with --requeue-on ---------------------------------------------------------------
REQUEUE = Policy(grace=10.0, agent_ahead=False, requeue_on=signal.SIGUSR1)


def test_the_requeue_signal_reaches_the_workers_then_stops_them_and_marks_the_run_for_requeue():
    state, actions = replay([SignalReceived(signal.SIGUSR1, 1.0)], needs_init=False, policy=REQUEUE)

    assert actions[1:] == [SignalRun(signal.SIGUSR1), SignalRun(signal.SIGTERM)]
    assert state.phase is Phase.STOPPING and state.requeue and state.exit_code == 138
    state, actions = step(REQUEUE, state, GenerationEnded(failures=(Failure.worker(0, -15),), now=2.0))
    assert actions == [Finish(138, "SIGUSR1: stopped so that Slurm requeues the job")]


def test_under_srun_slurm_signals_the_workers_itself_so_the_signal_is_not_handed_on_twice():
    policy = Policy(grace=10.0, agent_ahead=False, requeue_on=signal.SIGUSR1, signals_reach_workers=True)
    _, actions = replay([SignalReceived(signal.SIGUSR1, 1.0)], needs_init=False, policy=policy)
    assert SignalRun(signal.SIGUSR1) not in actions and SignalRun(signal.SIGTERM) in actions

    plain = Policy(grace=10.0, agent_ahead=False, signals_reach_workers=True)
    _, actions = replay([SignalReceived(signal.SIGUSR2, 1.0)], needs_init=False, policy=plain)
    assert actions[1:] == []


def test_the_requeue_signal_in_a_multi_node_job_is_announced_to_every_node():
    policy = Policy(grace=10.0, agent_ahead=False, requeue_on=signal.SIGUSR1, multi_node=True)
    _, actions = replay([SignalReceived(signal.SIGUSR1, 1.0)], needs_init=False, policy=policy)

    assert AnnounceStop(signal.SIGUSR1, "SIGUSR1 to node 0's pai-launch (requeue)") in actions


def test_the_requeue_signal_between_generations_ends_the_run_at_once():
    history = [GenerationEnded(failures=(Failure.worker(0, 3),), now=1.0), SignalReceived(signal.SIGUSR1, 1.5)]
    state, actions = replay(history, needs_init=False, policy=REQUEUE)

    assert state.phase is Phase.DONE and state.requeue and actions[-1] == Finish(138, state.reason)


def test_without_requeue_on_usr1_is_only_passed_on():
    state, actions = replay([SignalReceived(signal.SIGUSR1, 1.0)], needs_init=False, policy=Policy(agent_ahead=False))
    assert actions[1:] == [SignalRun(signal.SIGUSR1)] and state.phase is Phase.TRAINING and not state.requeue


def test_losing_node_0s_store_stops_the_workers_and_ends_with_exit_1():
    from pai_launch.core.events import JobStoreLost

    state, _ = replay([JobStoreLost("the job's store process ended", 1.0)], needs_init=False, policy=MULTI)
    assert state.phase is Phase.STOPPING and state.exit_code == exitcodes.LAUNCHER_ERROR
    state, actions = step(MULTI, state, GenerationEnded(failures=(Failure.worker(0, -15),), now=2.0))
    assert actions == [Finish(1, "the job's store process ended")]


def test_losing_the_store_while_a_stalled_generation_stops_ends_the_run_instead_of_retrying():
    from pai_launch.core.events import JobStoreLost

    stalling = Policy(grace=10.0, agent_ahead=False, multi_node=True, stall_timeout=5.0, stall_dump_wait=1.0)
    state, _ = replay([Tick(6.0), Tick(7.5)], needs_init=False, policy=stalling)
    assert state.phase is Phase.STOPPING
    state, _ = step(stalling, state, JobStoreLost("the job's store process ended", 8.0))
    state, actions = step(stalling, state, GenerationEnded(failures=(Failure.worker(0, -15),), now=9.0))
    assert actions == [Finish(exitcodes.LAUNCHER_ERROR, "the job's store process ended")]


def test_a_job_stopped_by_another_nodes_requeue_signal_is_requeued_here_too():
    state, _ = replay([GenerationEnded(stopped=JobStopped(signal.SIGUSR1, "SIGUSR1 to node 1's pai-launch (requeue)"),
                                       now=2.0)],
                      needs_init=False, policy=REQUEUE)
    assert state.requeue and state.exit_code == 138

    state, _ = replay([GenerationEnded(stopped=JobStopped(signal.SIGTERM, "SIGTERM to node 1's pai-launch"), now=2.0)],
                      needs_init=False, policy=REQUEUE)
    assert not state.requeue and state.exit_code == 143


def test_a_stop_carried_by_the_store_watch_stops_a_running_generation_with_the_jobs_signal():
    from pai_launch.core.events import JobStopSeen
    from pai_launch.core.state import StopCause

    state, _ = replay([], needs_init=False, policy=MULTI)
    state, actions = step(MULTI, state, JobStopSeen(signal.SIGTERM, "SIGTERM to node 0's pai-launch", 2.0))

    assert actions == [SignalRun(signal.SIGTERM)], "signalled once, not announced again"
    assert state.phase is Phase.STOPPING and state.current.stop.cause is StopCause.SIGNAL
    state, actions = step(MULTI, state, GenerationEnded(failures=(Failure.worker(0, -15),), now=3.0))
    assert actions[-1] == Finish(143, "the job was stopped: SIGTERM to node 0's pai-launch")
    assert state.failures == 0


def test_a_stop_carried_by_the_store_watch_between_generations_ends_the_run_at_once():
    from pai_launch.core.events import JobStopSeen

    state, _ = replay([GenerationEnded(failures=(Failure.worker(0, 1),), now=1.0)], needs_init=False, policy=MULTI)
    assert state.phase is Phase.BACKOFF
    state, actions = step(MULTI, state, JobStopSeen(signal.SIGINT, "SIGINT to node 0's pai-launch", 1.5))
    assert actions == [Finish(130, "the job was stopped: SIGINT to node 0's pai-launch")]
    # Already stopping for its own reasons: nothing changes.
    assert step(MULTI, state, JobStopSeen(signal.SIGTERM, "x", 2.0)) == (state, [])


def test_every_node_judges_failures_in_loading_alike_whatever_it_sees_of_the_folder():
    """Node 1 reads the shared folder later than node 0 (it may still see a file node 0 moved aside): both get the
    job's combined failures, and both decide the same: move aside and retry, twice, then give up."""
    from pathlib import Path

    torn = (Path(__file__).resolve().parents[1] / "failure_tails" / "torn_switch_safetensors.txt").read_text()
    failures = (Failure.worker(2, 1, torn, node=1), Failure.worker(0, -15, node=0))
    verdicts = []
    for node, seen in ((0, ("switch_4.pt", "switch_2.pt", "switch_6.pt")), (1, ("switch_4.pt", "switch_4.pt", None))):
        policy = Policy(grace=10.0, agent_ahead=False, multi_node=True, node_rank=node, max_failures=3)
        state, _ = step(policy, start(save_name="PAI", generation=2, init_done=True), __import__(
            "pai_launch.core.events", fromlist=["Began"]).Began(False, 0.0))
        decided = []
        for attempt, loaded in enumerate(seen):
            now = 100.0 * (attempt + 1)
            state, actions = step(policy, state, GenerationEnded(failures, now=now, loaded_from=loaded))
            decided.append((state.phase, state.failures, state.exit_code, "cannot be loaded" in state.reason))
            state, _ = step(policy, state, Tick(now + 50.0))
        verdicts.append(decided)
    assert verdicts[0] == verdicts[1], verdicts
