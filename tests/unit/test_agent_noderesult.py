"""agent.noderesult: what a node of a multi-node job reports for a generation, from what it read in the job's store."""

from __future__ import annotations

import signal

from pai_launch.agent import noderesult
from pai_launch.agent.noderesult import NodeFacts
from pai_launch.wire.protocol import GenerationResult, WorkerFailure
from pai_launch.wire.storelink import JobStopped
from pai_launch.wire.storevalues import NodeOutcome

LOG_DIR = "/logs/generation-4"
STOP = JobStopped(signal.SIGTERM, "SIGTERM to node 1's pai-launch")


def _facts(**given) -> NodeFacts:
    return NodeFacts(**{"generation": 4, "log_dir": LOG_DIR, "started": True, "store": "node0:29500", **given})


def _failed(rank: int, returncode: int, at: float, node: int = 0, collateral: bool = False) -> WorkerFailure:
    return WorkerFailure(rank, returncode, pid=100 + rank, node=node, host=f"host{node}", at=at, collateral=collateral)


# --- this node's own failures ---------------------------------------------------------------------------------------
def test_local_failures_are_named_with_this_node_and_none_is_collateral_before_a_stop():
    failures = (WorkerFailure(1, 3, 101, "boom", at=10.0), WorkerFailure(0, 1, 100, at=11.0))
    assert noderesult.local_failures(failures, node=2, host="h2", stopped_at=None) == (
        WorkerFailure(1, 3, 101, "boom", node=2, host="h2", at=10.0),
        WorkerFailure(0, 1, 100, node=2, host="h2", at=11.0))


def test_failures_once_this_node_stopped_its_workers_are_collateral_within_the_clocks_margin():
    failures = (WorkerFailure(0, 1, 100, at=9.9), WorkerFailure(1, 1, 101, at=9.96), WorkerFailure(2, 1, 102, at=12.0))
    local = noderesult.local_failures(failures, node=1, host="h1", stopped_at=10.0)
    assert [f.collateral for f in local] == [False, True, True]


def test_a_launchers_stop_after_the_first_failure_is_collateral_but_never_the_first():
    failures = (WorkerFailure(0, -15, 100, at=1.0), WorkerFailure(1, 137, 101, at=2.0),
                WorkerFailure(2, 5, 102, at=3.0))
    local = noderesult.local_failures(failures, node=0, host="h0", stopped_at=None)
    assert [f.collateral for f in local] == [False, True, False]


# --- a stop seen in the outcomes ----------------------------------------------------------------------------------
def test_the_first_node_that_was_stopping_the_job_names_the_stop():
    outcomes = (NodeOutcome(0, "h0"), NodeOutcome(1, "h1", stopping=(signal.SIGINT, "Ctrl-C")),
                NodeOutcome(2, "h2", stopping=(signal.SIGTERM, "SIGTERM")))
    stop = noderesult.stop_among(outcomes)
    assert (stop.signum, stop.reason) == (signal.SIGINT, "Ctrl-C")
    assert noderesult.stop_among((NodeOutcome(0, "h0"),)) is None


# --- no worker ran on this node -------------------------------------------------------------------------------------
def test_unstarted_a_stop_of_the_job_wins():
    result = noderesult.decide(_facts(started=False, stopped_by=STOP, peer_fatal="not shared", error="rdzv"))
    assert result == GenerationResult(4, log_dir=LOG_DIR, stopped_signal=signal.SIGTERM,
                                      stopped_reason="SIGTERM to node 1's pai-launch")


def test_unstarted_a_peers_fatal_problem_comes_without_an_error():
    result = noderesult.decide(_facts(started=False, peer_fatal="the save folder is not shared", error="rdzv failed"))
    assert result == GenerationResult(4, fatal="the save folder is not shared", log_dir=LOG_DIR)


def test_unstarted_the_launchers_error_then_the_stores_then_a_plain_why():
    assert noderesult.decide(_facts(started=False, error="rdzv failed", store_error="gone")).error == "rdzv failed"
    assert noderesult.decide(_facts(started=False, store_error="gone")) == GenerationResult(4, error="gone",
                                                                                              log_dir=LOG_DIR)
    assert noderesult.decide(_facts(started=False)).error == "the generation ended before this node's workers started"


def test_unstarted_ignores_outcomes_and_members():
    result = noderesult.decide(_facts(started=False, outcomes=(NodeOutcome(1, "h1", error="x"),), members=3,
                                      lost={2: "(h2) stopped responding"}))
    assert result.members == 1 and result.failures == () and result.fatal is None


# --- workers ran: every member's outcome combined -------------------------------------------------------------------
def test_every_node_exiting_zero_is_a_clean_result_with_its_member_count():
    result = noderesult.decide(_facts(outcomes=(NodeOutcome(0, "h0"), NodeOutcome(1, "h1")), members=2))
    assert result == GenerationResult(4, log_dir=LOG_DIR, members=2)


def test_the_earliest_real_failure_on_any_node_comes_first_and_no_lost_node_is_an_error_then():
    first, stopped = _failed(1, 3, at=5.0, node=1), _failed(0, -15, at=6.0, node=0, collateral=True)
    outcomes = (NodeOutcome(0, "h0", failures=(stopped,)), NodeOutcome(1, "h1", failures=(first,)))
    result = noderesult.decide(_facts(outcomes=outcomes, lost={2: "(h2) stopped responding"}, members=3))
    assert result == GenerationResult(4, failures=(first, stopped), log_dir=LOG_DIR, members=3)


def test_a_lost_node_is_the_error_when_no_worker_really_failed():
    result = noderesult.decide(_facts(outcomes=(NodeOutcome(0, "h0"),), lost={1: "(h1) stopped responding"}, members=2))
    assert result == GenerationResult(4, error="node 1 (h1) stopped responding", log_dir=LOG_DIR, members=2)


def test_a_store_that_went_away_counts_as_node_0_lost():
    result = noderesult.decide(_facts(outcomes=(NodeOutcome(1, "h1"),), store_error="connection reset"))
    assert result.error == "node 0 (the job's store at node0:29500) is gone: connection reset"


def test_a_fatal_problem_on_any_node_is_the_results():
    outcomes = (NodeOutcome(0, "h0"), NodeOutcome(1, "h1", fatal="the save folder is not shared"))
    assert noderesult.decide(_facts(outcomes=outcomes, members=2)).fatal == "the save folder is not shared"


def test_a_stop_of_the_job_outranks_the_failures_and_the_lost_store_it_caused():
    stopped = _failed(0, -15, at=6.0, collateral=True)
    facts = _facts(outcomes=(NodeOutcome(0, "h0", failures=(stopped,)),), stopped_by=STOP, store_error="reset",
                   lost={1: "(h1) stopped responding"}, members=2)
    assert noderesult.decide(facts) == GenerationResult(4, failures=(stopped,), log_dir=LOG_DIR,
                                                         stopped_signal=signal.SIGTERM,
                                                         stopped_reason="SIGTERM to node 1's pai-launch", members=2)
