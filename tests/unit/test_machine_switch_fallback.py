"""Switch files that do not load, as the state machine decides about them: the newest one every rank failed to load
before training is moved aside by the next start; a generation whose only progress was such a file counts against
the failure budget, so a script that can never save ends with exit 4."""

import pytest

from pai_launch.core import exitcodes
from pai_launch.core.actions import Finish, ScheduleRetry, StartGeneration
from pai_launch.core.events import Began, GenerationEnded, Tick
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, start, step

pytestmark = pytest.mark.timeout(30)

POLICY = Policy(grace=10.0, agent_ahead=False, max_failures=3, backoff_initial=1.0)


def _all_failed(name, now=1.0):
    return GenerationEnded((Failure.worker(0, 1, "RuntimeError: size mismatch"), Failure.worker(1, 1, "RuntimeError: x")),
                           now=now, all_failed_loading=name)


def _replay(events, state=None):
    state = state or start(save_name="PAI")
    emitted = []
    for event in [Began(False, 0.0), *events]:
        state, actions = step(POLICY, state, event)
        emitted.extend(actions)
    return state, emitted


def test_every_rank_failing_after_resuming_from_a_switch_file_moves_it_aside_on_the_retry():
    state, actions = _replay([_all_failed("switch_4.pt"), Tick(100.0)])
    retry = next(a for a in actions if isinstance(a, ScheduleRetry))
    assert "every rank failed to load switch_4.pt before training: it is moved aside" in retry.reason
    assert actions[-1] == StartGeneration(2, quarantine="switch_4.pt")
    assert state.unloadable is None, "moved aside once, by that start only"


def test_a_failure_after_training_started_moves_nothing():
    state = start(save_name="PAI")
    state, _ = step(POLICY, state, Began(False, 0.0))
    from pai_launch.core.events import SaveActivity
    state, _ = step(POLICY, state, SaveActivity(0.5, training=True))
    state, _ = step(POLICY, state, _all_failed("switch_4.pt"))
    state, actions = step(POLICY, state, Tick(100.0))
    assert actions == [StartGeneration(2)]


def test_a_generation_whose_only_progress_then_fails_to_load_counts_as_failed():
    # Generation 1 writes switch_2.pt (progress), generation 2 cannot load it: two failures, not one.
    state, actions = _replay([GenerationEnded(progressed=("switch_2.pt",), now=0.5), _all_failed("switch_2.pt")])
    assert state.failures == 2 and state.phase is Phase.BACKOFF


def test_a_script_that_can_never_save_a_loadable_file_ends_with_exit_4():
    history = []
    now = 0.0
    for generation in range(1, 8):
        now += 100.0
        if generation % 2:
            history.append(GenerationEnded(progressed=(f"switch_{2 * generation}.pt",), now=now))
        else:
            history += [_all_failed(f"switch_{2 * (generation - 1)}.pt", now=now), Tick(now + 50.0)]
    state, actions = _replay(history)
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED, actions
    finish = actions[-1]
    assert isinstance(finish, Finish) and "every rank failed to load" in finish.reason
    assert state.generation <= 4


def test_a_garbage_switch_file_failure_counts_like_any_failure():
    failure = Failure.checkpoint("generation 1 wrote no usable switch file (switch_2.pt: not a checkpoint)")
    state, actions = _replay([GenerationEnded((failure,), now=1.0), Tick(10.0), GenerationEnded((failure,), now=20.0),
                              Tick(30.0), GenerationEnded((failure,), now=40.0)])
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED
    assert "wrote no usable switch file" in actions[-1].reason


class _Session:
    """What Observer asks of the save folder here: which switch files fail the check, and what a generation loaded."""

    def __init__(self, bad=None, node=0, nproc=2, loaded=None, multi=False):
        from types import SimpleNamespace

        self.bad, self.node, self.loaded_switch = bad or {}, node, loaded
        self.spec = SimpleNamespace(nproc=nproc, nodes=SimpleNamespace(multi=multi))

    def not_checkpoints(self, names):
        return {name: why for name, why in self.bad.items() if name in names}


def _observer(**kwargs):
    from types import SimpleNamespace

    return SimpleNamespace(session=_Session(**kwargs))


def test_progress_keeps_only_switch_files_that_pass_the_check():
    from pai_launch.supervise.observer import Observer

    obs = _observer(bad={"switch_4.pt": "not a checkpoint"})
    assert Observer.checked_progress(obs, ("switch_2.pt", "switch_4.pt"), (), False, 2) == (("switch_2.pt",), ())
    kept, failures = Observer.checked_progress(obs, ("switch_4.pt",), (), False, 2)
    assert kept == () and failures[0].cause.value == "checkpoint"
    assert "generation 2 wrote no usable switch file (switch_4.pt: not a checkpoint)" in failures[0].describe()
    crash = (Failure.worker(1, 3),)
    assert Observer.checked_progress(obs, ("switch_4.pt",), crash, False, 2) == ((), crash), "a crash stays the cause"
    other_node = _observer(bad={"switch_4.pt": "not a checkpoint"}, node=1)
    assert Observer.checked_progress(other_node, ("switch_4.pt",), (), False, 2) == (("switch_4.pt",), ())


def test_every_rank_failing_names_the_switch_file_it_was_started_from():
    from pai_launch.supervise.observer import Observer

    both = (Failure.worker(0, 1), Failure.worker(1, 1))
    assert Observer.all_failed_loading(_observer(loaded="switch_4.pt"), both) == "switch_4.pt"
    assert Observer.all_failed_loading(_observer(loaded="switch_4.pt"), both[:1]) is None, "one rank: not the file"
    assert Observer.all_failed_loading(_observer(loaded=None), both) is None
    assert Observer.all_failed_loading(_observer(loaded="switch_4.pt", multi=True), both) is None
    assert Observer.all_failed_loading(_observer(loaded="switch_4.pt"), (Failure.launcher("agent died"),)) is None
