"""Real failure tails (tests/failure_tails: torch's, gloo's, safetensors' and PerforatedAI's own output, made by
running them or as users posted torch's messages) replayed through the cause reader and the state machine: each gets
its blame (the phase, the known cause, whether the switch file it was loading is bad) and the words it must show, and
only a tail that proves the file bad moves it aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pai_launch.core.actions import ScheduleRetry, StartGeneration
from pai_launch.core.events import Began, GenerationEnded, Tick
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Policy, start, step
from pai_launch.wire import failure_causes, failure_phase

pytestmark = pytest.mark.timeout(30)

TAILS = Path(__file__).resolve().parents[1] / "failure_tails"
CASES = json.loads((TAILS / "cases.json").read_text())["cases"]


def test_every_tail_in_the_folder_has_a_case_and_a_source():
    assert set(CASES) == {path.name for path in TAILS.glob("*.txt")}
    assert all(case["source"] for case in CASES.values())


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cause_reader_blames_each_real_tail(name):
    case, text = CASES[name], (TAILS / name).read_text()
    cause = failure_causes.known_cause(text)
    assert cause is not None and cause.id == case["cause"]
    assert failure_phase.phase_of(text).value == case["phase"]
    assert (failure_phase.unloadable_line(text) is not None) == case["unloadable"]
    described = Failure.worker(1, case["returncode"], text).describe()
    assert cause.name in described, "a known cause is named, not only the exit or the signal"


@pytest.mark.parametrize("name", sorted(CASES))
def test_replayed_through_the_machine_only_proof_moves_the_switch_file(name):
    """Rank 1 fails with the tail right after starting from switch_4.pt; the agent stops rank 0 (-15)."""
    case, text = CASES[name], (TAILS / name).read_text()
    policy = Policy(grace=5.0, agent_ahead=False, max_failures=3)
    state, _ = step(policy, start(save_name="PAI", generation=2, init_done=True), Began(False, 0.0))
    ended = GenerationEnded((Failure.worker(1, case["returncode"], text), Failure.worker(0, -15)), now=1.0,
                            loaded_from="switch_4.pt")
    state, actions = step(policy, state, ended)
    assert state.failures == 1, "one failure, counted once"
    retry = next(a for a in actions if isinstance(a, ScheduleRetry))
    for word in case["words"]:
        assert word in retry.reason, retry.reason
    state, actions = step(policy, state, Tick(100.0))
    started = next(a for a in actions if isinstance(a, StartGeneration))
    assert (started.quarantine == "switch_4.pt") == case["unloadable"], started
    if case["phase"] == "training":
        assert "before training" not in retry.reason


def test_a_checkpoint_read_inside_add_validation_score_is_training_not_the_switch_file():
    """A torn best_model.pt read in training says PytorchStreamReader too: the frames around it say where it was."""
    text = ('File "train.py", line 80, in <module>\n    GPA.pai_tracker.add_validation_score(score, model)\n'
            + (TAILS / "torn_torch_save.txt").read_text())
    assert failure_phase.phase_of(text) is failure_phase.Phase.TRAINING
    assert failure_phase.unloadable_line(text) is None
