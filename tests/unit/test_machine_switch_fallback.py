"""Switch files that do not load, as the state machine decides about them: a switch file is moved aside only on
evidence (a rank failed in loading it and said why the file is bad, or failed loading it the same way twice), never
because every rank failed; progress already recorded is never taken back; and a script that never writes a loadable
switch file ends with exit 4."""

from pathlib import Path

import pytest

from pai_launch.core import exitcodes
from pai_launch.core.actions import Finish, ScheduleRetry, StartGeneration
from pai_launch.core.events import Began, GenerationEnded, SaveActivity, Tick
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, start, step

pytestmark = pytest.mark.timeout(30)

POLICY = Policy(grace=10.0, agent_ahead=False, max_failures=3, backoff_initial=1.0)
TAILS = Path(__file__).resolve().parents[1] / "failure_tails"


def tail(name: str) -> str:
    return (TAILS / name).read_text()


def _ended(*failures, loaded="switch_4.pt", now=1.0, progressed=()):
    return GenerationEnded(tuple(failures), now=now, loaded_from=loaded, progressed=progressed)


TORN = Failure.worker(0, 1, tail("torn_switch_safetensors.txt"))
STOPPED = Failure.worker(1, -15)  # the agent stopped the other rank


def _replay(events, state=None, policy=POLICY):
    state = state or start(save_name="PAI")
    emitted = []
    for event in [Began(False, 0.0), *events]:
        state, actions = step(policy, state, event)
        emitted.extend(actions)
    return state, emitted


def test_a_rank_that_fails_loading_with_a_torn_file_error_moves_the_file_aside_on_the_retry():
    state, actions = _replay([_ended(TORN, STOPPED), Tick(100.0)])
    retry = next(a for a in actions if isinstance(a, ScheduleRetry))
    assert "switch_4.pt cannot be loaded (rank 0: safetensors._safetensors_rust.SafetensorError" in retry.reason
    assert "it is moved aside and the run resumes from the switch file before it" in retry.reason
    start_action = actions[-1]
    assert isinstance(start_action, StartGeneration) and start_action.quarantine == "switch_4.pt"
    assert "SafetensorError" in start_action.quarantine_why
    assert state.unloadable is None and state.failures == 1, "moved aside once, counted once"


@pytest.mark.parametrize("name", ["store_barrier_timeout.txt", "perforate_config_race.txt", "cuda_oom_at_start.txt",
                                  "nccl_unhandled_cuda_error.txt"])
def test_every_rank_failing_before_training_for_another_reason_moves_nothing(name):
    """Issue: a transient failure of every rank before training quarantined a good checkpoint."""
    both = (Failure.worker(0, 1, tail(name)), Failure.worker(1, 1, tail(name)))
    state, actions = _replay([_ended(*both), Tick(100.0)])
    assert actions[-1] == StartGeneration(2), actions
    assert state.failures == 1 and state.quarantined == 0


def test_one_ranks_config_race_after_a_switch_file_is_retried_and_takes_no_progress_back():
    """Issue: rank 1's JSONDecodeError in perforate_model was blamed on switch_2.pt, the previous generation's
    progress was revoked (failures = old + 2) and the run ended at once with exit 4."""
    race = Failure.worker(1, 1, tail("perforate_config_race.txt"))
    state, actions = _replay([GenerationEnded(progressed=("switch_2.pt",), now=0.5),
                              _ended(race, Failure.worker(0, -15), loaded="switch_2.pt"), Tick(100.0)])
    assert state.phase is Phase.TRAINING and state.failures == 1
    retry = next(a for a in actions if isinstance(a, ScheduleRetry))
    assert "perforate-model-race" in retry.reason and "cannot be loaded" not in retry.reason
    assert actions[-1] == StartGeneration(3)


def test_a_failure_in_loading_without_proof_moves_the_file_only_when_it_repeats_from_the_same_file():
    unexplained = Failure.worker(0, 1, 'File "train.py", line 9, in main\n    UPA.load_system(model, "PAI", '
                                 '"switch_4")\n'
                                       "ValueError: unexpected key")
    state, actions = _replay([_ended(unexplained), Tick(100.0)])
    assert actions[-1] == StartGeneration(2), "once is no proof"
    state, actions = step(POLICY, state, _ended(unexplained, now=101.0))
    retry = next(a for a in actions if isinstance(a, ScheduleRetry))
    assert "failed loading it twice the same way: ValueError: unexpected key" in retry.reason
    state, actions = step(POLICY, state, Tick(300.0))
    assert actions[0].quarantine == "switch_4.pt" and "twice the same way" in actions[0].quarantine_why


def test_a_failure_in_training_moves_nothing_whatever_checkpoint_it_was_reading():
    in_training = Failure.worker(0, 1, 'File "train.py", line 80, in <module>\n'
                                       "    GPA.pai_tracker.add_validation_score(score, model)\n"
                                       + tail("torn_torch_save.txt"))
    state, _ = _replay([SaveActivity(0.5, training=True), _ended(in_training, STOPPED)])
    state, actions = step(POLICY, state, Tick(100.0))
    assert actions == [StartGeneration(2)]


def test_a_script_that_can_never_save_a_loadable_file_ends_with_exit_4():
    history, now = [], 0.0
    for generation in range(1, 12):
        now += 100.0
        if generation % 2:
            history.append(GenerationEnded(progressed=(f"switch_{2 * generation}.pt",), now=now))
        else:
            history += [_ended(TORN, STOPPED, loaded=f"switch_{2 * (generation - 1)}.pt", now=now), Tick(now + 50.0)]
    state, actions = _replay(history)
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED, actions
    finish = actions[-1]
    assert isinstance(finish, Finish) and "3 switch file(s) the script wrote could not be loaded" in finish.reason
    assert sum(isinstance(a, StartGeneration) and a.quarantine is not None for a in actions) == 2


def test_a_garbage_switch_file_failure_counts_like_any_failure():
    failure = Failure.checkpoint("generation 1 wrote no usable switch file (switch_2.pt: not a checkpoint)")
    state, actions = _replay([GenerationEnded((failure,), now=1.0), Tick(10.0), GenerationEnded((failure,), now=20.0),
                              Tick(30.0), GenerationEnded((failure,), now=40.0)])
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED
    assert "wrote no usable switch file" in actions[-1].reason


def _folder(progressed, bad):
    from pai_launch.supervise.folder.generation_files import FolderAtEnd

    return FolderAtEnd(complete=False, progressed=progressed, unusable=bad, dendrites=0, max_dendrites=None,
                       max_from="", loaded_switch=None)


def test_progress_keeps_only_switch_files_that_pass_the_check():
    bad = {"switch_4.pt": "not a checkpoint"}
    assert _folder(("switch_2.pt", "switch_4.pt"), bad).checked_progress((), 2) == (("switch_2.pt",), ())
    kept, failures = _folder(("switch_4.pt",), bad).checked_progress((), 2)
    assert kept == () and failures[0].cause.value == "checkpoint"
    assert "generation 2 wrote no usable switch file (switch_4.pt: not a checkpoint)" in failures[0].describe()
    crash = (Failure.worker(1, 3),)
    assert _folder(("switch_4.pt",), bad).checked_progress(crash, 2) == ((), crash), "a crash stays the cause"
    # Another node checks nothing (its view of a shared folder may lag): its reading has no unusable files.
    assert _folder(("switch_4.pt",), {}).checked_progress((), 2) == (("switch_4.pt",), ())


def test_a_ranks_own_proof_outranks_a_late_write_seen_in_the_save_folder():
    """The last generation's switch file can show up as a write after the next one started: the failed rank's
    output, which says it died loading the file, decides."""
    state, _ = _replay([SaveActivity(0.5, training=True), _ended(TORN, STOPPED)])
    state, actions = step(POLICY, state, Tick(100.0))
    assert actions[-1].quarantine == "switch_4.pt"
