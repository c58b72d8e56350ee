"""A stop that was asked for is logged, shown and counted as stopped, never as a failure: scripted histories in, the
log line's name and fields, `pai-launch status`'s story and the metrics out."""

import signal

from pai_launch.core.events import Began, GenerationEnded, InitExited, JobStopped, SaveActivity
from pai_launch.core.failure import Failure
from pai_launch.core.machine import Phase, Policy, ended_report, start, step
from pai_launch.core.observations import SignalReceived
from pai_launch.core.reports import generation_end
from pai_launch.status.events import history
from pai_launch.status.model import FAILED, STOPPED
from pai_launch.supervise.outputs.metrics import RunMetrics

POLICY = Policy(grace=10.0, agent_ahead=False)
KEY_ERROR = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n" \
    "KeyError: 'best_mean_score_imp'\n"
STOPPED_WORKERS = (Failure.worker(0, 128 + signal.SIGTERM, "rank 0 stopping"), Failure.worker(1, -signal.SIGTERM))


def replay(events, policy=POLICY, needs_init=False):
    state = start(save_name="PAI")
    for event in [Began(needs_init, 0.0), *events]:
        state, _ = step(policy, state, event)
    return state


def test_a_stop_signal_mid_generation_logs_the_generation_as_stopped_with_its_cause_and_no_tail():
    state = replay([SaveActivity(1.0), SignalReceived(signal.SIGTERM, 2.0)])
    assert state.phase is Phase.STOPPING and state.stopped_by == "SIGTERM"
    name, fields = generation_end(ended_report(state, GenerationEnded(STOPPED_WORKERS, now=3.0)))
    assert name == "generation_stopped"
    assert fields["cause"] == "SIGTERM" and fields["reason"] == "stopped by SIGTERM"
    assert fields["exit_codes"] == {"0": 143, "1": -15}
    assert not {"rank", "log_line", "fix", "tail"} & set(fields)


def test_a_rank_that_crashed_of_its_own_during_the_stop_is_named_in_the_stopped_line():
    state = replay([SignalReceived(signal.SIGINT, 2.0)])
    crashed = (Failure.worker(1, 1, KEY_ERROR), Failure.worker(0, -signal.SIGINT))
    name, fields = generation_end(ended_report(state, GenerationEnded(crashed, now=3.0)))
    assert name == "generation_stopped" and fields["cause"] == "SIGINT"
    assert (fields["rank"], fields["exit"], fields["log_line"]) == (1, "exit code 1", "KeyError: 'best_mean_score_imp'")


def test_the_requeue_signal_and_a_job_wide_stop_are_stops_too():
    requeue = Policy(grace=10.0, agent_ahead=False, requeue_on=signal.SIGUSR1)
    state = replay([SignalReceived(signal.SIGUSR1, 2.0)], policy=requeue)
    assert state.stopped_by == "SIGUSR1 (requeue)"
    assert generation_end(ended_report(state, GenerationEnded(STOPPED_WORKERS)))[0] == "generation_stopped"
    running = replay([])
    by_node = GenerationEnded(STOPPED_WORKERS, stopped=JobStopped(signal.SIGTERM, "SIGTERM to node 1's pai-launch"))
    name, fields = generation_end(ended_report(running, by_node))
    assert name == "generation_stopped" and fields["cause"] == "SIGTERM to node 1's pai-launch"
    assert step(POLICY, running, by_node)[0].stopped_by == "SIGTERM to node 1's pai-launch"


def test_a_failure_without_a_stop_is_still_a_failure():
    state = replay([SaveActivity(1.0)])
    assert state.stopped_by is None
    assert generation_end(ended_report(state, GenerationEnded(STOPPED_WORKERS)))[0] == "generation_failed"


def test_a_stop_before_anything_runs_or_during_the_init_run_is_remembered():
    assert replay([SignalReceived(signal.SIGHUP, 0.5)], needs_init=True).stopped_by == "SIGHUP"
    state, _ = step(POLICY, start(save_name="PAI"), SignalReceived(signal.SIGTERM, 0.0))  # before Began
    assert state.stopped_by == "SIGTERM" and state.phase is Phase.DONE
    stopped = replay([SignalReceived(signal.SIGTERM, 1.0), InitExited(-15, now=2.0)], needs_init=True)
    assert stopped.phase is Phase.DONE and stopped.exit_code == 143


def _ev(name, **fields):
    return {"event": name, "time": "2026-12-01T16:43:08Z", **fields}


def test_status_shows_a_stopped_generation_as_stopped_and_counts_no_failure():
    story = history([
        _ev("run_started", pid=1), _ev("generation_started", generation=1),
        _ev("generation_stopped", generation=1, duration_s=2.0, cause="SIGTERM", reason="stopped by SIGTERM",
            exit_codes={"0": 143}),
        _ev("run_finished", exit_code=143, reason="stopped by SIGTERM", stopped_by="SIGTERM")])
    (generation,) = story.generations
    assert generation.outcome == STOPPED and generation.detail == "stopped by SIGTERM"
    assert not [g for g in story.generations if g.outcome == FAILED] and not story.problems
    assert story.sessions[-1].stopped_by == "SIGTERM"


def test_status_names_a_rank_that_crashed_during_a_stop():
    story = history([
        _ev("run_started", pid=1), _ev("generation_started", generation=1),
        _ev("generation_stopped", generation=1, duration_s=2.0, cause="SIGINT", reason="stopped by SIGINT", rank=1,
            exit="exit code 1", log_line="KeyError: 'best_mean_score_imp'")])
    (generation,) = story.generations
    assert generation.outcome == STOPPED and generation.rank == 1
    assert generation.detail == \
        "stopped by SIGINT; rank 1 had exited with exit code 1 (KeyError: 'best_mean_score_imp')"


def test_status_shows_a_stopped_init_run_without_an_init_failure():
    story = history([_ev("run_started", pid=1), _ev("init_started"),
                     _ev("init_exited", exit="signal SIGTERM", duration_s=1.0, stopped_by="SIGTERM")])
    assert story.init.exit == "stopped (SIGTERM)" and not story.problems


def test_metrics_count_no_failure_for_a_stopped_generation(tmp_path):
    metrics = RunMetrics(lambda: tmp_path)
    metrics.observe({"event": "generation_started", "generation": 1, "nproc": 2})
    metrics.observe({"event": "generation_stopped", "generation": 1, "duration_s": 2.0,
                     "exit_codes": {"0": 143, "1": -15},
                     "switch_files": []})
    sample = metrics.registry.get_sample_value
    assert sample("pai_launch_generation_failures_total") == 0
    assert sample("pai_launch_consecutive_failures") == 0
    assert sample("pai_launch_last_worker_exit_code", {"rank": "0"}) == 143
    assert sample("pai_launch_generation_running") == 0
