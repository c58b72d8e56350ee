"""A known failure's cause, fix and doctor check reach the failure event, the run's reason and `pai-launch status`."""

from pai_launch.core import exitcodes
from pai_launch.core.events import Began, GenerationEnded, InitExited
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Policy, ended_report, start, step
from pai_launch.core.reports import generation_end
from pai_launch.status.events import history
from tests.unit.test_failure_causes import FAULTHANDLER_ABORT, GLOO_BUFFERS, RANK_UNSET

POLICY = Policy(grace=10.0, agent_ahead=False, max_failures=1)


def replay(events, needs_init=True):
    state = start(save_name="PAI")
    for event in [Began(needs_init, 0.0), *events]:
        state, _ = step(POLICY, state, event)
    return state


def test_generation_failed_carries_the_explaining_line_and_the_known_cause():
    state = replay([GenerationEnded((Failure.worker(1, 1, FAULTHANDLER_ABORT),))], needs_init=False)
    name, fields = generation_end(ended_report(state, GenerationEnded((Failure.worker(1, -6, FAULTHANDLER_ABORT),))))
    assert name == "generation_failed" and fields["rank"] == 1 and fields["exit"] == "signal SIGABRT"
    assert fields["log_line"].startswith("what():  [enforce fail at ../third_party/gloo")
    assert fields["doctor_id"] == "ddp-broadcast-buffers" and "broadcast_buffers=False" in fields["fix"]
    assert "buffer broadcast" in fields["cause"]


def test_a_failure_with_no_known_cause_adds_only_its_line():
    state = replay([], needs_init=False)
    crash = Failure.worker(0, 3, "rank 0 failing on purpose with 3")
    _, fields = generation_end(ended_report(state, GenerationEnded((crash,))))
    assert fields["log_line"] == "rank 0 failing on purpose with 3" and "cause" not in fields
    _, fields = generation_end(ended_report(state, GenerationEnded((Failure.worker(0, 3),))))
    assert "log_line" not in fields


def test_run_finished_names_the_cause_that_ended_the_run():
    state = replay([GenerationEnded((Failure.worker(1, 1, GLOO_BUFFERS),))], needs_init=False)
    assert state.exit_code == exitcodes.BUDGET_EXHAUSTED
    assert state.reason.endswith("last: rank 1 failed with exit code 1: DistributedDataParallel's buffer broadcast got "
                                 "buffers of another size (added dendrites change them per rank) (pai-launch doctor "
                                 "check ddp-broadcast-buffers; fix: pass broadcast_buffers=False (and "
                                 "find_unused_parameters=True) to DistributedDataParallel)")


def test_an_init_run_without_rank_is_named():
    state = replay([InitExited(1, log_tail=RANK_UNSET)])
    assert state.exit_code == exitcodes.INIT_FAILED
    assert state.reason.startswith("init run failed with exit code 1: init_process_group ran where torchrun set no "
                                   "RANK")
    assert "pai-launch doctor check init-process-group-unguarded" in state.reason
    assert replay([InitExited(2, log_tail="error: unrecognized arguments")]).reason == \
        "init run failed with exit code 2"


def _ev(name, **fields):
    return {"event": name, "time": "2026-12-01T16:43:08Z", **fields}


def test_status_shows_the_explaining_line_and_the_cause():
    story = history([
        _ev("run_started", pid=1), _ev("generation_started", generation=1),
        _ev("generation_failed", generation=1, rank=1, exit="signal SIGABRT", duration_s=2.0),
        _ev("worker_log_tail", rank=1, tail=FAULTHANDLER_ABORT)])
    detail = story.generations[0].detail
    assert detail.startswith("rank 1 failed with signal SIGABRT; last log line: what():  [enforce fail at")
    assert "; cause: DistributedDataParallel's buffer broadcast" in detail
    assert "(pai-launch doctor check ddp-broadcast-buffers; fix: pass broadcast_buffers=False" in detail


def test_status_shows_what_explains_an_init_failure():
    story = history([_ev("run_started", pid=1), _ev("init_started"), _ev("init_exited", exit="exit code 1",
                                                                         duration_s=1.0),
                     _ev("init_output_tail", tail=RANK_UNSET)])
    kinds = [p.kind for p in story.problems]
    assert kinds == ["init_failed", "init_output_tail"]
    text = story.problems[0].text
    assert text.startswith("the init run ended with exit code 1; last log line: ValueError: Error initializing")
    assert "pai-launch doctor check init-process-group-unguarded" in text


def test_a_complete_generation_is_logged_as_ended_whatever_followed_the_marker():
    """Completion is terminal: a peer node that never reported in, or a rank's abort at exit, after the marker is
    said in the ended event, never as a failure."""
    state = replay([], needs_init=False)
    late = GenerationEnded((Failure.launcher("1 node(s) of the rendezvous never reported in"),), complete=True)
    name, fields = generation_end(ended_report(state, late))
    assert (name, fields["complete"]) == ("generation_ended", True)
    assert fields["exit"] == "training complete, then 1 node(s) of the rendezvous never reported in"
    aborted = GenerationEnded((Failure.worker(1, -6, FAULTHANDLER_ABORT),), complete=True)
    name, fields = generation_end(ended_report(state, aborted))
    assert (name, fields["exit"]) == ("generation_ended", "training complete, then rank 1: signal SIGABRT")
    assert generation_end(ended_report(state, GenerationEnded((Failure.worker(1, -6),))))[0] == "generation_failed"
