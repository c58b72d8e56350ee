"""A crash that repeats the one before: when it ends the run and when it is retried, from scripted histories."""

from pai_launch.core import exitcodes
from pai_launch.core.actions import ScheduleRetry
from pai_launch.core.events import Began, GenerationEnded, InitExited, SaveActivity, Tick
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, start
from tests.machine_steps import step

POLICY = Policy(grace=10.0, agent_ahead=False)
INIT_OK = InitExited(0, wrote_to="PAI")
KEY_ERROR = ("epoch 3 validation 0.41\nTraceback (most recent call last):\n  File \"train.py\", line 80, in <module>\n"
             "    loss = criterion(model(x), labels[\"target\"])\nKeyError: 'target'\n")
#: PerforatedAI's best_model.pt race: transient, so a repeat of it is retried within the budget.
VALIDATION_RACE = ("epoch 3 validation 0.41\nTraceback (most recent call last):\n  File \"train.py\", line 80, in "
                   "<module>\n"
                   "    GPA.pai_tracker.add_validation_score(score, model)\nKeyError: 'best_mean_score_imp'\n")


def replay(history, *, policy=POLICY):
    state, emitted = start(save_name="PAI"), []
    for event in [Began(True, 0.0), *history]:
        state, actions = step(policy, state, event)
        emitted.extend(actions)
    return state, emitted


def trained_crash(now, tail=KEY_ERROR, rank=1, code=1, progressed=()):
    """A generation whose workers trained (a write beyond start-up files), then `rank` crashed."""
    return [SaveActivity(now + 1.0), GenerationEnded(failures=(Failure.worker(rank, code, tail),),
                                                     progressed=progressed,
                                                    now=now + 2.0)]


def attempts(*crashes):
    """INIT_OK, then each generation's events with the backoff's Tick between them."""
    history, now = [INIT_OK], 0.0
    for crash in crashes:
        history += crash(now)
        now += 100.0
        history.append(Tick(now))
    return history


def test_the_same_crash_after_training_started_is_retried_once_then_ends_the_run_naming_the_repeat():
    state, actions = replay(attempts(trained_crash, trained_crash)[:-1])
    assert [type(a).__name__ for a in actions] == ["StartInit", "StartGeneration", "ReportTrainingReached",
                                                   "ScheduleRetry", "StartGeneration", "ReportTrainingReached",
                                                   "Finish"]
    assert state.phase is Phase.DONE and state.exit_code == 1 and state.failures == 2
    assert "the same crash as the attempt before" in state.reason and "after training started" in state.reason
    assert "--max-failures" in state.reason and "rank 1 failed with exit code 1" in state.reason


def test_lines_before_the_crash_may_differ_the_crash_is_what_is_compared():
    other_epoch = KEY_ERROR.replace("epoch 3 validation 0.41", "epoch 5 validation 0.38")
    state, _ = replay(attempts(trained_crash, lambda now: trained_crash(now, tail=other_epoch))[:-1])
    assert state.phase is Phase.DONE and "same crash" in state.reason


def test_an_explicit_max_failures_retries_the_same_crash_up_to_it():
    policy = Policy(grace=10.0, agent_ahead=False, max_failures=4, retry_repeats=True)
    state, actions = replay(attempts(*[trained_crash] * 4)[:-1], policy=policy)
    assert sum(isinstance(a, ScheduleRetry) for a in actions) == 3
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED and "gave up after 4" in state.reason


def test_another_rank_or_another_cause_is_retried_within_the_budget():
    other_rank = lambda now: trained_crash(now, rank=0)  # noqa: E731
    other_cause = lambda now: trained_crash(now, tail="RuntimeError: CUDA error: an illegal memory access\n")  # noqa: E731
    for second in (other_rank, other_cause):
        state, _ = replay(attempts(trained_crash, second)[:-1])
        assert state.phase is Phase.BACKOFF and state.failures == 2


def test_a_crash_repeated_after_progress_repeats_nothing():
    progressed = lambda now: trained_crash(now, progressed=("switch_2.pt",))  # noqa: E731
    state, _ = replay(attempts(trained_crash, progressed)[:-1])
    assert state.phase is Phase.BACKOFF and state.failures == 1
    state, _ = replay(attempts(trained_crash, lambda now: [GenerationEnded(progressed=("switch_2.pt",), now=now)],
                               trained_crash)[:-1])
    assert state.phase is Phase.BACKOFF and state.failures == 1


def test_a_transient_known_cause_that_repeats_is_retried_within_the_budget():
    race = lambda now: trained_crash(now, tail=VALIDATION_RACE)  # noqa: E731
    state, actions = replay(attempts(race, race, race)[:-1])
    assert sum(isinstance(a, ScheduleRetry) for a in actions) == 2
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED and "the same crash" not in state.reason


def test_the_same_known_cause_on_another_rank_is_the_same_crash():
    """Every rank runs the same script: which one dies of a known cause first is timing."""
    wrapped = "Need to call .module when using add validation score\nbdb.BdbQuit\n"
    first = lambda now: trained_crash(now, tail=wrapped, rank=0)  # noqa: E731
    second = lambda now: trained_crash(now, tail=wrapped, rank=1)  # noqa: E731
    state, _ = replay(attempts(first, second)[:-1])
    assert state.phase is Phase.DONE and "the same crash as the attempt before" in state.reason


def test_an_early_failure_then_the_same_crash_after_training_is_retried():
    bare = "KeyError: 'target'\n"  # no frame, no write: nothing says it trained
    early = lambda now: [GenerationEnded(failures=(Failure.worker(1, 1, bare),), now=now)]  # noqa: E731
    state, _ = replay(attempts(early, lambda now: trained_crash(now, tail=bare))[:-1])
    assert state.phase is Phase.BACKOFF and state.failures == 2


def test_a_crash_whose_output_shows_training_counts_as_after_training_without_any_write():
    """A first epoch can end in a backward pass before the script wrote anything: the tail is the evidence."""
    tail = KEY_ERROR.replace("loss = criterion", "loss.backward()  # after criterion")
    in_training = lambda now: [GenerationEnded(failures=(Failure.worker(1, 1, tail),), now=now)]  # noqa: E731
    state, _ = replay(attempts(in_training, in_training)[:-1])
    assert state.phase is Phase.DONE and "after training started, the same crash" in state.reason


def test_a_repeated_stall_is_retried_within_the_budget():
    policy = Policy(grace=10.0, agent_ahead=False, stall_timeout=30.0, stall_dump_wait=5.0)
    history = [INIT_OK]
    for start_at in (0.0, 200.0):
        history += [SaveActivity(start_at + 1.0), Tick(start_at + 31.0), Tick(start_at + 36.0),
                    GenerationEnded(failures=(Failure.worker(0, -15),), now=start_at + 37.0), Tick(start_at + 199.0)]
    state, _ = replay(history[:-1], policy=policy)
    assert state.phase is Phase.BACKOFF and state.failures == 2


def test_a_rendezvous_that_timed_out_ends_the_run_at_once_naming_the_option():
    """The wait for nodes is bounded by --rdzv-timeout: a retry would wait as long again."""
    timed_out = Failure.launcher("RendezvousTimeoutError: not every node joined generation 1 within --rdzv-timeout 4 s")
    state, actions = replay([INIT_OK, GenerationEnded(failures=(timed_out,), now=5.0)])
    assert state.phase is Phase.DONE and state.exit_code == exitcodes.LAUNCHER_ERROR
    assert "--rdzv-timeout 4 s" in state.reason and not any(isinstance(a, ScheduleRetry) for a in actions)
