"""torchrun's multi-node options, parsed and checked; and how the nodes' outcomes are combined into one."""

from dataclasses import replace

import pytest

from pai_launch.placement.nodes import Nodes, NodesError, check, parse_endpoint, parse_nnodes
from pai_launch.wire import codec, storevalues
from pai_launch.wire.crossnode import Beats, combine, gen_key, generation_rendezvous_id
from pai_launch.wire.protocol import WorkerFailure
from pai_launch.wire.storevalues import NodeOutcome


@pytest.mark.parametrize("text, expected", [("1", (1, 1)), ("2", (2, 2)), ("1:4", (1, 4)), ("3:3", (3, 3))])
def test_nnodes_is_n_or_min_max(text, expected):
    assert parse_nnodes(text) == expected


@pytest.mark.parametrize("text", ["0", "2:1", "a", "1:2:3", "", "-1", "1:", "0:2"])
def test_a_bad_nnodes_names_the_option_and_an_example(text):
    with pytest.raises(NodesError, match="--nnodes"):
        parse_nnodes(text)


@pytest.mark.parametrize("text, expected", [
    ("node1:29500", ("node1", 29500)), ("node1", ("node1", 29400)), ("10.0.0.1:1", ("10.0.0.1", 1)),
    ("[::1]:29400", ("::1", 29400)), ("[fe80::1]", ("fe80::1", 29400)),
    ("gpu-01.cluster.local:6000", ("gpu-01.cluster.local", 6000)),
])
def test_an_endpoint_is_host_and_port_with_torchruns_default_port(text, expected):
    assert parse_endpoint(text) == expected


@pytest.mark.parametrize("text", ["", ":29400", "host:", "host:port", "host:0", "host:65536", "a:b:c", "[::1", "[::1]x",
                                  "bad host:1", "-host:1"])
def test_a_malformed_endpoint_is_refused(text):
    with pytest.raises(NodesError, match="--rdzv-endpoint"):
        parse_endpoint(text)


def test_the_node_rank_must_be_inside_the_node_count():
    with pytest.raises(NodesError, match="--node-rank 2 is outside --nnodes 2"):
        check(Nodes(min_nodes=2, max_nodes=2, node_rank=2), endpoint_given=True)
    check(Nodes(min_nodes=1, max_nodes=4, node_rank=3), endpoint_given=True)


def test_several_nodes_need_an_endpoint_and_a_positive_timeout():
    with pytest.raises(NodesError, match="needs --rdzv-endpoint"):
        check(Nodes(min_nodes=2, max_nodes=2), endpoint_given=False)
    with pytest.raises(NodesError, match="--rdzv-timeout"):
        check(Nodes(min_nodes=2, max_nodes=2, rdzv_timeout=0), endpoint_given=True)
    with pytest.raises(NodesError, match="--rdzv-id"):
        check(Nodes(min_nodes=2, max_nodes=2, rdzv_id="a b"), endpoint_given=True)
    check(Nodes(), endpoint_given=False)


def test_each_generation_has_its_own_rendezvous_id():
    assert generation_rendezvous_id("job7", 3) == "job7-g3"
    assert generation_rendezvous_id("job7", 3) != generation_rendezvous_id("job7", 4)
    assert gen_key(3, "result", 1) == "pai/g3/result/1"


def test_an_endpoint_prints_back_as_given():
    assert Nodes(host="::1", port=5).endpoint == "[::1]:5"
    assert Nodes(min_nodes=1, max_nodes=3, node_rank=2, host="n1", port=9).describe() == \
        "node 2 of 1:3, rendezvous store at n1:9"


@pytest.mark.parametrize("nodes, count, others", [
    (Nodes(min_nodes=2, max_nodes=2, node_rank=0), "2", "1"),
    (Nodes(min_nodes=2, max_nodes=4, node_rank=2), "2:4", "0, 1, 3"),
])
def test_a_generation_waits_for_every_other_node_each_time(nodes, count, others):
    """Each generation is a fresh rendezvous: at its start no other node has joined it yet."""
    assert (nodes.count, nodes.others) == (count, others)


# --- combining the nodes' outcomes -------------------------------------------------------------------
def failure(rank, code, *, node, at, collateral=False):
    return WorkerFailure(rank, code, 100 + rank, node=node, host=f"h{node}", at=at, collateral=collateral)


def test_the_root_cause_is_the_earliest_real_failure_on_any_node_collateral_stops_after_it():
    outcomes = [
        NodeOutcome(0, "h0", (failure(0, -15, node=0, at=5.0, collateral=True),)),
        NodeOutcome(1, "h1", (failure(3, 7, node=1, at=4.0), failure(2, -15, node=1, at=4.1, collateral=True))),
    ]
    combined = combine(outcomes, {})

    assert [(f.rank, f.node) for f in combined.failures] == [(3, 1), (2, 1), (0, 0)]
    assert combined.error is None and combined.fatal is None


def test_every_node_combines_the_same_outcomes_to_the_same_result_whatever_their_order():
    outcomes = [NodeOutcome(0, "h0", (failure(1, 3, node=0, at=2.0),)),
                NodeOutcome(1, "h1", (failure(2, 4, node=1, at=1.0),))]
    assert combine(outcomes, {}) == combine(list(reversed(outcomes)), {})
    assert combine(outcomes, {}).failures[0].rank == 2


def test_a_rank_on_another_node_whose_log_says_its_peer_closed_the_connection_comes_after_the_crash_it_followed():
    # Node 0's rank saw its gloo pair closed a moment before node 1's crash was seen there (clocks differ by that much).
    closed = replace(failure(0, 1, node=0, at=3.0), log_tail="RuntimeError: [pair.cc:553] Connection closed by peer "
                     "[10.0.0.2]:4100")
    crashed = replace(failure(1, 1, node=1, at=3.05), log_tail="ValueError: rank 1 broke")
    outcomes = [NodeOutcome(0, "h0", (closed,)), NodeOutcome(1, "h1", (crashed,))]

    assert [f.rank for f in combine(outcomes, {}).failures] == [1, 0]
    assert combine(outcomes, {}) == combine(list(reversed(outcomes)), {})


def test_a_lost_node_is_the_cause_when_no_worker_failed_for_real():
    outcomes = [NodeOutcome(0, "h0", (failure(0, -15, node=0, at=5.0, collateral=True),))]
    combined = combine(outcomes, {1: "(h1) stopped responding: no heartbeat for 10 s"})

    assert combined.error == "node 1 (h1) stopped responding: no heartbeat for 10 s"


def test_a_fatal_problem_on_any_node_is_everyones():
    combined = combine([NodeOutcome(0, "h0"), NodeOutcome(1, "h1", fatal="not shared")], {})
    assert combined.fatal == "not shared"


def test_a_clean_generation_on_every_node_combines_to_no_failure():
    combined = combine([NodeOutcome(0, "h0"), NodeOutcome(1, "h1")], {})
    assert combined.failures == () and combined.error is None and combined.fatal is None


def test_an_outcome_survives_the_store_as_json():
    outcome = NodeOutcome(1, "h1", (failure(2, 9, node=1, at=3.5),), error="x", fatal=None)
    assert storevalues.STORE.decode(codec.encode_text(outcome), expect=NodeOutcome) == outcome


def test_a_member_is_lost_once_its_beat_count_stops_moving_for_the_limit():
    beats = Beats(lost_after=10.0)
    beats.update(1, 1, now=0.0)
    beats.update(1, 2, now=5.0)
    assert beats.lost(14.0) == []
    beats.update(1, 2, now=14.0)  # seen again, not moved
    assert beats.lost(15.0) == [1]


def test_nodes_that_never_said_who_they_were_are_counted_as_the_cause():
    outcomes = [NodeOutcome(0, "h0", (failure(0, -15, node=0, at=5.0, collateral=True),))]
    combined = combine(outcomes, {-1: "1 node(s) of the rendezvous never reported in"})

    assert combined.error == "1 node(s) of the rendezvous never reported in"


def test_a_stopping_nodes_outcome_survives_the_store_as_json():
    outcome = NodeOutcome(0, "h0", (failure(0, -15, node=0, at=1.0),), stopping=(15, "SIGTERM to node 0's pai-launch"))
    back = storevalues.STORE.decode(codec.encode_text(outcome), expect=NodeOutcome)
    assert back == outcome and back.stopping == (15, "SIGTERM to node 0's pai-launch")


def test_with_the_store_or_a_node_gone_a_signalled_worker_is_not_the_cause():
    outcomes = [NodeOutcome(1, "h1", (failure(1, -15, node=1, at=1.0), failure(2, 143, node=1, at=1.1)))]
    combined = combine(outcomes, {0: "(the job's store at h0:29400) is gone"})

    assert combined.error == "node 0 (the job's store at h0:29400) is gone"
    real = combine([NodeOutcome(1, "h1", (failure(1, 3, node=1, at=1.0),))], {0: "(the job's store) is gone"})
    assert real.error is None and real.failures[0].returncode == 3, "a worker's own exit code still comes first"
