"""The nodes' watch on each other while a generation runs costs the job's store a constant number of operations per
node and beat, however many nodes: each watches only the next group rank, and one alarm counter tells every node
that a peer failed or was lost. At the generation's end each node reads every outcome in a constant number of
requests too, once the count of published ones says all are in. Driven here on an in-memory store that counts what
it serves, with N nodes' monitors stepped by hand through scripted clocks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pai_launch.agent import multinode
from pai_launch.agent.control import AgentControl
from pai_launch.wire import crossnode
from pai_launch.wire.storelink import StoreLink, StoreLost
from pai_launch.wire.storevalues import Member, NodeOutcome
from tests.memstore import MemoryStore

pytestmark = pytest.mark.timeout(60)

SECRET = "0123456789abcdef0123456789abcdef"


class Job:
    """N nodes' generation 1, every node's workers running with group rank = node rank (torch may order them
    otherwise; the ring follows group ranks)."""

    def __init__(self, size: int, order=None) -> None:
        self.store = MemoryStore()
        self.stopped: list[int] = []
        self.nodes = []
        order = order or list(range(size))
        for node in range(size):
            request = SimpleNamespace(nodes=SimpleNamespace(node_rank=node, max_nodes=size, min_nodes=size),
                                      grace=30.0)
            generation = multinode.NodeGeneration(request, StoreLink(self.store, node, SECRET), 1, AgentControl())
            generation.host = f"host{node}"
            generation.watch = SimpleNamespace(group=(order[node], size), ranks={1000 + node: order[node]},
                                               processes=list)
            generation._stop_local = lambda node=node: self.stopped.append(node)
            self.nodes.append(generation)

    def silence(self, node: int) -> None:
        """Every node but `node` beats, from 0.5 s on, until it has been silent for longer than LOST_AFTER."""
        now = 0.0
        while now < crossnode.LOST_AFTER + 1.0:
            now += crossnode.BEAT_INTERVAL
            self.beat(now, skip={node})

    def beat(self, now: float, skip=()) -> int:
        """Every node's monitor looks once (but those in `skip`); the store operations that took."""
        before = self.store.ops
        for generation in self.nodes:
            if generation.nodes.node_rank not in skip:
                generation._check_once(now)
        return self.store.ops - before


@pytest.mark.parametrize("size", [4, 64])
def test_a_beat_costs_the_store_a_constant_number_of_operations_per_node(size):
    job = Job(size)
    job.beat(0.0)  # registration: a few writes each
    job.beat(0.5)  # the ring found (each node reads its peer's member once)
    steady = [job.beat(1.0 + 0.5 * step) / size for step in range(4)]
    assert steady == [steady[0]] * 4
    assert steady[0] <= 5, f"{steady[0]} store operations per node and beat"
    assert not job.stopped


def test_the_cost_per_node_does_not_grow_with_the_job():
    small, large = Job(4), Job(128)
    for job in (small, large):
        job.beat(0.0)
        job.beat(0.5)
    assert small.beat(1.0) / 4 == large.beat(1.0) / 128


def test_a_node_that_stops_beating_is_named_lost_by_its_watcher_and_every_node_stops():
    job = Job(6, order=[3, 0, 5, 1, 2, 4])  # node 4 has group rank 2; its watcher has group rank 1: node 3
    job.beat(0.0)
    job.silence(4)
    assert job.nodes[3].lost == {4: "(host4) stopped responding: no heartbeat for 10 s"}
    assert all(not job.nodes[n].lost for n in (0, 1, 2, 5)), "one watcher per node, not every node"
    assert set(job.stopped) == {0, 1, 2, 3, 5}
    assert job.nodes[0].link.outcome(1, 4).lost == job.nodes[3].lost[4], "published for every node to read"


def test_a_node_that_never_registers_is_reported_missing():
    job = Job(3)
    del job.nodes[2:]
    now = 0.0
    while now < crossnode.LOST_AFTER + 1.0:
        job.beat(now)
        now += crossnode.BEAT_INTERVAL
    assert job.nodes[0].lost[-1].startswith("1 node(s) of the rendezvous never reported in")
    assert set(job.stopped) == {0, 1}


def test_a_failed_outcome_raises_the_alarm_and_every_other_node_stops_within_a_beat():
    job = Job(8)
    job.beat(0.0)
    job.beat(0.5)
    job.nodes[5].link.publish(1, NodeOutcome(5, "host5", error="its workers could not start"))
    job.beat(1.0)
    assert set(job.stopped) == set(range(8)) - {5} or set(job.stopped) == set(range(8))


def test_a_fatal_peer_before_registration_is_found_through_the_alarm():
    job = Job(4)
    for generation in job.nodes[1:]:
        generation.watch.group = None  # their workers not started yet
    job.nodes[0].link.publish(1, NodeOutcome(0, "host0", fatal="the save folder is not shared"))
    job.beat(0.0)
    assert [job.nodes[n].peer_fatal for n in (1, 2, 3)] == ["the save folder is not shared"] * 3


def _end(job: Job, outcomes: dict[int, NodeOutcome]) -> list[int]:
    """Every node publishes its outcome, then gathers everyone's; the store operations each gather took."""
    for node, outcome in outcomes.items():
        job.nodes[node].published = True
        assert job.nodes[node].link.publish(1, outcome)
    costs = []
    for node, outcome in outcomes.items():
        before = job.store.ops
        gathered = job.nodes[node]._gather({node: outcome})
        costs.append(job.store.ops - before)
        assert gathered == outcomes
    return costs


@pytest.mark.parametrize("size", [4, 64])
def test_reading_every_outcome_at_the_end_costs_each_node_a_constant_number_of_requests(size):
    job = Job(size)
    job.beat(0.0)
    failed = NodeOutcome(2, "host2", error="its workers could not start")
    costs = _end(job, {n: failed if n == 2 else NodeOutcome(n, f"host{n}") for n in range(size)})
    assert costs == [5] * size, "the published count, then two checks and two multi_gets"


def test_a_member_lost_is_published_as_lost_and_every_node_reads_that_in_a_few_requests():
    job = Job(4)
    job.beat(0.0)
    job.silence(3)
    assert job.nodes[2].lost == {3: "(host3) stopped responding: no heartbeat for 10 s"}
    for node in (0, 1, 2):
        assert job.nodes[node].link.publish(1, NodeOutcome(node, f"host{node}"))
    for node in (0, 1, 2):
        before = job.store.ops
        gathered = job.nodes[node]._gather({node: NodeOutcome(node, f"host{node}")})
        assert job.store.ops - before == 5
        assert sorted(gathered) == [0, 1, 2]
        assert job.nodes[node].lost == {3: "(host3) stopped responding: no heartbeat for 10 s"}


def test_a_lost_member_that_publishes_late_is_still_lost_on_every_node_itself_included():
    job = Job(3)
    job.beat(0.0)
    job.silence(2)
    late = job.nodes[2]
    assert not late.link.publish(1, NodeOutcome(2, "host2")), "its watcher's outcome came first and stands"
    for node in (0, 1):
        assert job.nodes[node].link.publish(1, NodeOutcome(node, f"host{node}"))
    assert late._gather({}) == {0: NodeOutcome(0, "host0"), 1: NodeOutcome(1, "host1")}
    assert late.lost == {2: "(host2) stopped responding: no heartbeat for 10 s"}


def test_a_peer_that_ends_while_its_watcher_looks_is_not_lost():
    job = Job(2)
    job.beat(0.0)
    assert job.nodes[1].link.publish(1, NodeOutcome(1, "host1"))
    job.silence(1)
    assert not job.nodes[0].lost and job.nodes[0].link.outcome(1, 1) == NodeOutcome(1, "host1")


class DyingStore:
    """A node's view of the shared store that serves `left` more requests, then its node is dead (Died)."""

    class Died(Exception):
        pass

    def __init__(self, store: MemoryStore, left: int) -> None:
        self.store, self.left = store, left

    def __getattr__(self, method):
        def call(*args):
            if self.left == 0:
                raise DyingStore.Died(method)
            self.left -= 1
            return getattr(self.store, method)(*args)
        return call


@pytest.mark.parametrize("requests_served", range(4))
def test_a_node_killed_at_any_point_of_publishing_its_failure_is_still_found_by_its_watcher(requests_served):
    """Its pai-launch killed as its workers end: the node dies wherever it was in publishing their failure. Its
    watcher still stops every node within LOST_AFTER and reads an outcome for it: its own, whole, or lost."""
    job = Job(2)
    job.beat(0.0)
    job.beat(0.5)
    dying = job.nodes[1].link
    dying.store = DyingStore(job.store, requests_served)
    killed = NodeOutcome(1, "host1", error="its workers were killed")
    try:
        dying.publish(1, killed)
    except StoreLost:
        pass  # died here
    job.silence(1)
    assert 0 in job.stopped, "the watcher stopped its own workers"
    outcome = job.nodes[0].link.outcome(1, 1)
    assert outcome == killed or outcome == NodeOutcome(1, "host1", lost=job.nodes[0].lost[1]), outcome


def test_on_torchs_own_store_the_first_outcome_stands_and_a_value_without_the_secret_holds_no_place():
    """put_first rests on TCPStore.compare_set answering as MemoryStore does: checked on the real store."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=10))
    node1, watcher = StoreLink(store, 1, SECRET), StoreLink(store, 0, SECRET)
    own = NodeOutcome(1, "host1", error="its workers were killed")
    assert node1.publish(1, own)
    assert not watcher.report_lost(1, Member(1, "host1", 1, (1,)), "lost")
    assert watcher.outcome(1, 1) == own and watcher.alarm(1) == 2, "the failure stands; the alarm raised again"
    store.set(watcher.key(crossnode.gen_key(2, "result", 1)), "not sealed with the secret")
    assert node1.publish(2, NodeOutcome(1, "host1")) and watcher.outcome(2, 1) == NodeOutcome(1, "host1")
    assert store.compare_set(watcher.key(crossnode.gen_key(3, "result", 1)), "x", "y") == b"x", "absent stays absent"
