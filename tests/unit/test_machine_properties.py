"""The machine's promises about stops, checked over random event histories (Hypothesis' stateful testing).

A model of the runner drives the machine: it starts what StartInit/StartGeneration ask for, ends those processes
only while they run, answers AdoptSaveFolder and RecheckProgress, and moves a clock that only goes forward. Over
any history of signals, ticks, writes, markers, ends, failures and lost folders:

- after a stop signal, everything has exited or a kill follows by the grace deadline; with nothing running, the
  run ends at once;
- a second SIGINT kills at once;
- nothing is started after a stop signal, a stop that ends the run, or Finish (and nothing happens after Finish);
- nothing is started while processes of the run are running;
- counters never go backwards (the generation number, the init run, the marker, a stop's kill); the failure count
  drops only after a generation that made progress;
- every started init run or generation ends exactly once: the machine is in a running phase exactly while its
  processes run, and never finishes while they still do;
- and once stopped, every history finishes.
"""

from __future__ import annotations

import signal

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pai_launch.core.actions import (
    AdoptSaveFolder,
    Finish,
    KillRun,
    PrepareAgent,
    RecheckProgress,
    ScheduleRetry,
    StartGeneration,
    StartInit,
)
from pai_launch.core.events import (
    AdoptionRefused,
    Began,
    GenerationEnded,
    GenerationRefused,
    InitExited,
    JobStopped,
    JobStoreLost,
    ProgressRechecked,
    SaveActivity,
    SaveFolderAdopted,
    SaveFolderLost,
    Tick,
    WorkersLaunched,
    WorkersWaiting,
)
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, StopCause, start, step
from pai_launch.core.observations import MarkerAppeared, SignalReceived
from pai_launch.core.state import STOP_SIGNALS

pytestmark = pytest.mark.timeout(120)

#: Fixed and small, so that CI is reproducible and quick: the same histories on every run, no example database.
HISTORIES = settings(max_examples=1000, stateful_step_count=50, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow])
RUNNING = (Phase.INIT, Phase.TRAINING, Phase.STOPPING)
STARTS = (StartInit, StartGeneration, PrepareAgent)
#: Stops after which the run ends (a stall's stop is retried).
ENDING_CAUSES = (StopCause.SIGNAL, StopCause.COMPLETE, StopCause.SAVE_LOST, StopCause.STORE_LOST)


def often(value, other, times: int = 3):
    """`value` `times` times as often as `other`: Hypothesis draws each rule and each choice evenly, and a history
    that is stopped or refused at once never gets to a retry, a kill or a second stop."""
    return st.sampled_from([value] * times + [other])


@st.composite
def policies(draw) -> Policy:
    grace = draw(st.sampled_from([0.5, 2.0, 10.0]))
    return Policy(
        grace=grace, stall_dump_wait=min(5.0, grace), stall_timeout=draw(often(3.0, None)),
        data_parallel=draw(often(False, True)), retry_data_parallel=draw(st.booleans()),
        max_failures=draw(st.integers(1, 5)), retry_repeats=draw(st.booleans()),
        backoff_initial=draw(st.sampled_from([0.1, 1.0])), backoff_max=4.0,
        agent_ahead=draw(st.booleans()), multi_node=draw(st.booleans()), fs_settle=draw(st.sampled_from([0.0, 2.0])),
        adopt_save_folder=draw(often(True, False)),
        requeue_on=draw(st.sampled_from([None, signal.SIGUSR1, signal.SIGTERM])),
    )


#: Mostly a failing worker (retried), each with its own last line so that not every one repeats the one before.
failures = st.one_of(
    st.tuples(st.builds(Failure.worker, st.integers(0, 1), st.sampled_from([1, -9, -15, -signal.SIGUSR1]),
                        st.integers(0, 99).map(lambda n: f"line {n}"))),
    st.tuples(st.builds(Failure.worker, st.integers(0, 1), st.sampled_from([1, -9]), st.integers(0, 99).map(str))),
    st.just(()),
    st.just((Failure.launcher("rendezvous timed out"),)),
)
#: A crash in training that comes back the same way on every attempt (the script's own bug).
SAME_CRASH = Failure.worker(1, 1, "epoch 2\nKeyError: 'best_mean_score_imp'")
progressed = st.sampled_from([(), (), ("switch_2.pt",), ("switch_4.pt",)])


class StopHistories(RuleBasedStateMachine):
    """The runner's side of the conversation, with the promises checked on every step."""

    @initialize(policy=policies(), needs_init=st.booleans(), generation=st.integers(0, 3), failures=st.integers(0, 2),
                stubborn=st.booleans())
    def begin(self, policy, needs_init, generation, failures, stubborn):
        self.policy = policy
        #: The script ignores stop signals: once asked to stop, its processes end only when killed.
        self.stubborn = stubborn
        self.state = start(save_name="PAI", generation=generation if not needs_init else 0,
                           failures=min(failures, policy.max_failures - 1), init_done=not needs_init)
        self.now = 0.0
        #: What runs now: "init", "generation" or None.
        self.running: str | None = None
        self.adopting = False
        self.rechecks = 0
        #: When the first stop signal came while processes ran; whether they were killed since they started.
        self.stop_signal_at: float | None = None
        self.killed = False
        self.stopped = False
        #: Something the run cannot go on after came: a lost save folder or job store, a job-wide stop.
        self.doomed = False
        self.finishes = 0
        self.feed(Began(needs_init, self.now))

    # --- feeding the machine, and the promises each step keeps ---------------------------------------
    def feed(self, event) -> None:
        before = self.state
        after, actions = step(self.policy, before, event)
        if before.phase is Phase.DONE:
            assert (after, actions) == (before, []), "something happened after Finish"
        ends_run = before.phase is Phase.STOPPING and before.current.stop.cause in ENDING_CAUSES
        if self.stopped or self.doomed or ends_run or self.finishes:
            assert not [a for a in actions if isinstance(a, STARTS)], f"started after a stop: {actions}"
        for action in actions:
            self.carry_out(action, before, after)
        if isinstance(event, SignalReceived) and before.phase is not Phase.DONE and self.is_stop_signal(event.signum):
            self.on_stop_signal(event, actions)
            if event.signum in STOP_SIGNALS or after.requeue:  # the requeue signal is ignored while a stop ends the run
                assert after.stopped_by is not None, "a stop signal was not remembered as what stopped the run"
        if isinstance(event, Tick) and self.running and self.stop_signal_at is not None:
            if event.now >= self.stop_signal_at + self.policy.grace:
                assert self.killed, f"still running {event.now - self.stop_signal_at:g} s after a stop signal, not " \
                    "killed"
        self.check_counters(before, event, after, actions)
        self.state = after

    def carry_out(self, action, before, after) -> None:
        if isinstance(action, (StartInit, StartGeneration)):
            assert self.running is None, f"{action} while {self.running} runs"
            self.running, self.killed = ("init" if isinstance(action, StartInit) else "generation"), False
        if isinstance(action, StartGeneration):
            assert action.generation == before.generation + 1 == after.generation
        elif isinstance(action, AdoptSaveFolder):
            self.adopting = True
        elif isinstance(action, RecheckProgress):
            self.rechecks += 1
        elif isinstance(action, KillRun):
            self.killed = True
        elif isinstance(action, Finish):
            self.finishes += 1
            assert self.finishes == 1, "finished twice"
            assert self.running is None, f"finished while the {self.running} still runs"

    def is_stop_signal(self, signum: int) -> bool:
        return signum in STOP_SIGNALS or signum == self.policy.requeue_on

    def on_stop_signal(self, event: SignalReceived, actions) -> None:
        if self.running is None:
            assert any(isinstance(a, Finish) for a in actions), "a stop signal with nothing running must end the run"
        elif event.signum == signal.SIGINT and self.stopped:
            assert self.killed, "a second SIGINT must kill"
        if self.running is not None and self.stop_signal_at is None:
            self.stop_signal_at = event.now
        self.stopped = True

    def check_counters(self, before, event, after, actions) -> None:
        assert after.generation >= before.generation
        assert after.init_done >= before.init_done and after.marker_seen >= before.marker_seen
        if after.failures < before.failures:
            assert isinstance(event, (GenerationEnded,
                                      ProgressRechecked)) and event.progressed, "failures dropped without progress"
        if before.stopped_by is not None:
            assert after.stopped_by == before.stopped_by, "what asked for the stop was forgotten"
            assert not [a for a in actions if isinstance(a, ScheduleRetry)], "a retry after a stop was asked for"
        if after.phase is Phase.DONE and before.phase is not Phase.DONE and "the same crash" in after.reason:
            assert isinstance(event,
                              GenerationEnded) and not self.policy.retry_repeats, \
                              "a repeat ended a run with --max-failures"
            assert before.trained_failure == event.failures[0].cause_signature(), \
                "ended on a crash that repeats nothing"
        was, now = before.current.stop, after.current.stop
        if was is not None and now is not None and was.killed and before.current.started_at == after.current.started_at:
            assert now.killed, "a stop's kill was forgotten"

    @invariant()
    def the_machine_runs_exactly_while_processes_do(self):
        if self.state.phase is not Phase.DONE:
            assert (self.state.phase in RUNNING) == (self.running is not None), (self.state.phase, self.running)

    # --- what happens ------------------------------------------------------------------------------
    @rule(dt=st.sampled_from([0.1, 0.5, 1.0, 2.0]))
    def time_passes(self, dt):
        self.now += dt
        self.feed(Tick(self.now))

    @rule(dt=st.sampled_from([5.0, 30.0]))
    def much_time_passes(self, dt):
        self.time_passes(dt)

    @rule(signum=st.sampled_from([signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2]),
          now=often(False, True, times=2))
    def signal_arrives(self, signum, now):
        """A signal, one step in three: a stop signal at every step would end most histories before they go far."""
        if now:
            self.feed(SignalReceived(signum, self.now))

    @precondition(lambda self: self.running is not None and not (self.stubborn and self.state.phase is Phase.STOPPING
                                                                 and not self.killed))
    @rule(failed=failures, complete=often(False, True, times=5), progress=progressed,
          stopped=often(False, True, times=5),
          wrote_to=st.sampled_from(["PAI", "PAI", "PAI", "OTHER", None]), init_code=often(0, 1, times=5))
    def processes_exit(self, failed, complete, progress, stopped, wrote_to, init_code):
        """The init run or the generation ends (a worker failing, every worker done, or killed)."""
        if self.running == "init":
            self.running = None
            self.feed(InitExited(init_code, wrote_to=wrote_to, now=self.now))
            return
        self.running = None
        by = JobStopped(signal.SIGTERM, "SIGTERM to node 0's pai-launch") if stopped and self.policy.multi_node \
            else None
        self.feed(GenerationEnded(failures=failed, complete=complete, progressed=progress, now=self.now, stopped=by))
        self.doomed = self.doomed or by is not None  # the job was stopped from another node

    @precondition(lambda self: self.running == "generation"
                  and not (self.stubborn and self.state.phase is Phase.STOPPING
                                                                     and not self.killed))
    @rule()
    def rank_crashes_in_training(self):
        """The generation trains, then rank 1 crashes as it did before: retried once, then the run ends."""
        self.feed(SaveActivity(self.now))
        self.running = None
        self.feed(GenerationEnded(failures=(SAME_CRASH,), now=self.now))

    @precondition(lambda self: self.adopting)
    @rule(refused=st.booleans())
    def adoption_answered(self, refused):
        self.adopting = False
        self.feed(AdoptionRefused("held by PID 7", self.now) if refused else SaveFolderAdopted("OTHER", self.now))

    @precondition(lambda self: self.rechecks > 0)
    @rule(complete=st.booleans(), progress=progressed)
    def progress_rechecked(self, complete, progress):
        self.rechecks -= 1
        self.feed(ProgressRechecked(complete=complete, progressed=progress, now=self.now))

    @rule(what=st.sampled_from(["start-up file", "training write", "waiting", "launched"]))
    def workers_report(self, what):
        """What a running generation shows along the way: writes to the save folder, the agent taking its request."""
        events = {"start-up file": SaveActivity(self.now, training=False), "training write": SaveActivity(self.now),
                  "waiting": WorkersWaiting(self.now), "launched": WorkersLaunched(self.now)}
        self.feed(events[what])

    @rule(what=st.sampled_from(["marker", "refused", "save folder lost", "store lost", *["nothing"] * 8]))
    def something_rare(self, what):
        """Rarer news, one step in three: the completion marker, a refused generation, a lost save folder or store."""
        if what == "nothing":
            return
        if what == "refused":
            if self.running != "generation":
                return
            self.running = None
            self.feed(GenerationRefused("the save folder PAI was removed", self.now))
            return
        events = {"marker": MarkerAppeared(self.now), "save folder lost": SaveFolderLost("PAI was removed", self.now),
                  "store lost": JobStoreLost("store gone", self.now)}
        self.feed(events[what])
        self.doomed = self.doomed or what != "marker"

    def teardown(self):
        """Stop whatever is left, as a user would: the run must finish (processes that ignore SIGTERM once killed)."""
        if not hasattr(self, "state"):
            return
        self.feed(SignalReceived(signal.SIGTERM, self.now))
        for _ in range(20):
            if self.state.phase is Phase.DONE:
                return
            if self.adopting:
                self.adoption_answered(False)
            elif self.rechecks:
                self.progress_rechecked(False, ())
            elif self.running is not None and (self.killed or not self.stubborn):
                code = -9 if self.killed else -15
                self.processes_exit((Failure.worker(0, code),), False, (), False, None, code)
            else:
                self.time_passes(self.policy.grace / 2)
        raise AssertionError(f"a stopped run did not finish: {self.state}")


StopHistories.TestCase.settings = HISTORIES
test_stop_histories = StopHistories.TestCase
