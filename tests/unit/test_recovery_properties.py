"""Recovery's promises, checked over random histories through the machine (Hypothesis' stateful testing):

- no whole switch file is moved aside without a load failure on it (a rank failed loading it and said why the file is
  bad, or failed loading it the same way twice);
- after the completion marker no generation starts;
- the recorded dendrite count never goes down;
- a new invocation's first failure is retried whenever its budget allows a retry (--max-failures 2 or more), however
  the previous invocation ended.

Failures carry real tails (tests/failure_tails), so the cause reader's blame is part of what is checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pai_launch.core.actions import Finish, ScheduleRetry, StartGeneration, StartInit
from pai_launch.core.events import Began, GenerationEnded, InitExited, SaveActivity, Tick
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, start, step
from pai_launch.core.observations import MarkerAppeared
from pai_launch.wire import failure_phase

pytestmark = pytest.mark.timeout(120)

HISTORIES = settings(max_examples=400, stateful_step_count=40, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow])
TAILS = Path(__file__).resolve().parents[1] / "failure_tails"
REAL_TAILS = sorted(path.read_text() for path in TAILS.glob("*.txt"))
UNEXPLAINED_LOAD = 'File "train.py", line 9, in main\n    UPA.load_system(model, "PAI", "switch_4")\n' \
    'ValueError: bad key\n'
tails = st.sampled_from([*REAL_TAILS, UNEXPLAINED_LOAD, "", "rank failing on purpose with 3"])


@st.composite
def policies(draw) -> Policy:
    return Policy(grace=2.0, agent_ahead=False, max_failures=draw(st.integers(1, 4)), retry_repeats=draw(st.booleans()),
                  backoff_initial=0.5, backoff_max=2.0, stall_timeout=draw(st.sampled_from([None, 3.0])),
                  stall_dump_wait=1.0, max_dendrites=draw(st.sampled_from([None, None, 3])))


class RecoveryHistories(RuleBasedStateMachine):
    @initialize(policy=policies(), generation=st.integers(0, 4), dendrites=st.integers(0, 3))
    def begin(self, policy, generation, dendrites):
        self.policy, self.now = policy, 0.0
        self.next_dendrites = dendrites
        # A resumed invocation: whatever the one before counted, this one starts with a full budget.
        self.state = start(save_name="PAI", generation=generation, init_done=generation > 0)
        self.running, self.loaded, self.marker, self.failed_once = None, None, False, False
        self.switches = [f"switch_{2 * n}.pt" for n in range(1, generation + 1)]
        #: file -> failures in loading it: (proof given, signature)
        self.load_failures: dict[str, list] = {}
        self.feed(Began(generation == 0, self.now))

    def feed(self, event) -> None:
        before = self.state
        after, actions = step(self.policy, before, event)
        for action in actions:
            if isinstance(action, StartGeneration):
                assert not self.marker, f"generation {action.generation} started after the completion marker"
                if action.quarantine is not None:
                    self.check_evidence(action.quarantine)
                    self.switches.remove(action.quarantine)
                self.running = "generation"
                self.loaded = self.switches[-1] if self.switches else None
            elif isinstance(action, StartInit):
                self.running = "init"
        assert after.dendrites >= before.dendrites, "the recorded dendrite count went down"
        if isinstance(event, GenerationEnded) and event.failures and not self.failed_once \
                and before.phase is Phase.TRAINING:
            self.failed_once = True
            ended = any(isinstance(a, Finish) for a in actions)
            if self.policy.max_failures >= 2 and not self.marker and not event.complete:
                assert not ended or after.quarantined > 0, \
                    f"the invocation's first failure was not retried: {after.reason}"
                assert ended or any(isinstance(a, ScheduleRetry) for a in actions)
        if any(isinstance(a, ScheduleRetry) for a in actions):
            self.failed_once = True  # a stall stopped and retried counts too: a later failure is not the first
        self.state = after

    def check_evidence(self, name: str) -> None:
        seen = self.load_failures.get(name, [])
        proven = any(proof for proof, _ in seen)
        repeated = any(seen[i][1] == seen[i + 1][1] for i in range(len(seen) - 1))
        assert proven or repeated, f"{name} moved aside without a load failure on it: {seen}"

    @invariant()
    def nothing_runs_once_done(self):
        if self.state.phase is Phase.DONE:
            assert self.running is None or self.state.exit_code is not None

    @rule(dt=st.sampled_from([0.3, 1.0, 4.0]))
    def time_passes(self, dt):
        self.now += dt
        self.feed(Tick(self.now))

    @precondition(lambda self: self.running == "init")
    @rule()
    def init_ends(self):
        self.running = None
        self.feed(InitExited(0, wrote_to="PAI", now=self.now))

    @precondition(lambda self: self.running == "generation")
    @rule(tail=tails, both=st.booleans(), trained=st.booleans())
    def generation_fails(self, tail, both, trained):
        if trained:
            self.feed(SaveActivity(self.now))
        failures = [Failure.worker(1, 1, tail)] + ([Failure.worker(0, 1, tail)] if both else [Failure.worker(0, -15)])
        if self.loaded is not None:
            for failure in failures:
                proof = failure.unloadable()  # a rank's own word counts whatever the folder's writes said
                if proof or (failure.phase() is failure_phase.Phase.LOAD and not self.state.current.reached_training):
                    self.load_failures.setdefault(self.loaded, []).append((proof, failure.signature()))
        self.running = None
        self.feed(GenerationEnded(tuple(failures), now=self.now, loaded_from=self.loaded))

    @precondition(lambda self: self.running == "generation")
    @rule(more=st.integers(-1, 1), rewrite=st.booleans())
    def generation_switches(self, more, rewrite):
        """A restructure: a switch file written (the same one rewritten when PerforatedAI rejects the dendrite)."""
        name = self.switches[-1] if rewrite and self.switches else f"switch_{2 * (self.state.generation + 1)}.pt"
        if name not in self.switches:
            self.switches.append(name)
        self.next_dendrites = max(0, self.next_dendrites + more)
        self.running = None
        self.feed(GenerationEnded(progressed=(name,), now=self.now, loaded_from=self.loaded,
                                  dendrites=self.next_dendrites,
                                  max_dendrites=2))

    @precondition(lambda self: self.running == "generation")
    @rule(during=st.booleans())
    def training_completes(self, during):
        """Rank 0 writes the marker: seen while the workers run, or only at the generation's end."""
        self.marker = True
        if during:
            self.feed(MarkerAppeared(self.now))
        else:
            self.running = None
            self.feed(GenerationEnded(complete=True, now=self.now, loaded_from=self.loaded))

    @precondition(lambda self: self.marker and self.running == "generation")
    @rule(code=st.sampled_from([0, -15, 1]))
    def lingering_workers_end(self, code):
        self.running = None
        failures = () if code == 0 else (Failure.worker(0, code),)
        self.feed(GenerationEnded(failures, complete=True, now=self.now, loaded_from=self.loaded))

    @precondition(lambda self: self.running is None and self.state.phase is not Phase.DONE)
    @rule()
    def marker_while_nothing_runs(self):
        self.marker = True
        self.feed(MarkerAppeared(self.now))


RecoveryHistories.TestCase.settings = HISTORIES
test_recovery_histories = RecoveryHistories.TestCase
