"""One node's client of the job's store: StoreLink, every key but INFO named by the job's secret and every value
sealed with it, and the calls a generation's agreement makes (crossnode tells the agreement itself).

Nothing here imports torch: StoreLink wraps a torch TCPStore client that store.client.connect makes (in the agent
and store processes only).
"""

from __future__ import annotations

import time

from pai_launch.wire.crossnode import (
    GENERATION,
    INFO,
    STOP,
    STOP_SEEN,
    ValueKey,
    gen_key,
    member_key,
    node_key,
    one_line,
    peer_failed,
    result_key,
    stop_seen_key,
)
from pai_launch.wire.jobsecret import namespaced, seal, unseal
from pai_launch.wire.storevalues import STORE, Member, NodeOutcome, OpenedGeneration


class StoreLost(Exception):
    """The job's store (node 0's pai-launch) cannot be reached any more."""


class JobStopped(Exception):
    """Some node's pai-launch was asked to stop the job."""

    def __init__(self, signum: int, reason: str) -> None:
        super().__init__(reason)
        self.signum = signum
        self.reason = reason


class StoreLink:
    """One agent's view of the job's store, every call turned into StoreLost when the store is gone; every key but
    INFO named by the job's secret and every value sealed with it (a value that fails its check reads as absent).
    Counters (add) cannot be sealed: only their names are hidden."""

    def __init__(self, store, node: int, secret: str) -> None:
        self.store = store
        self.node = node
        self.secret = secret

    def key(self, key: str) -> str:
        return key if key == INFO.name else namespaced(self.secret, key)

    def _call(self, method: str, *args):
        try:
            return getattr(self.store, method)(*args)
        except Exception as exc:  # noqa: BLE001 - torch raises DistStoreError/RuntimeError for a dead peer
            raise StoreLost(f"lost the job's store ({one_line(exc)})") from exc

    def get(self, key: str | ValueKey) -> str | None:
        """The text at `key` (unsealed), or None; a ValueKey's is its value encoded (read() decodes it)."""
        key = key.name if isinstance(key, ValueKey) else key
        if not self._call("check", [self.key(key)]):
            return None
        text = self._call("get", self.key(key)).decode(errors="replace")
        return text if key == INFO.name else unseal(self.secret, key, text)

    def set(self, key: str | ValueKey, value: str) -> None:
        key = key.name if isinstance(key, ValueKey) else key
        self._call("set", self.key(key), value if key == INFO.name else seal(self.secret, key, value))

    def read(self, key: ValueKey):
        """The typed value at `key`, or None; a value of another type is a WireError (a peer of another version)."""
        text = self.get(key)
        return None if text is None else STORE.decode(text, expect=key.value)

    def put(self, key: ValueKey, value) -> None:
        self.set(key, key.encode(value))

    def put_first(self, key: ValueKey, value) -> bool:
        """`value` at `key` unless a value is there already, in one request (the store's compare-and-set): a writer
        that dies while it writes leaves the key whole or absent. False when one was there."""
        sealed = seal(self.secret, key.name, key.encode(value))
        there = self._compare_set(key.name, "", sealed)
        if there != sealed and unseal(self.secret, key.name, there) is None:
            there = self._compare_set(key.name, there, sealed)  # not this job's value: it holds no place
        return there == sealed

    def _compare_set(self, key: str, expected: str, desired: str) -> str:
        """`desired` at `key` if what is there is `expected` ("": nothing); what is there now."""
        there = self._call("compare_set", self.key(key), expected, desired)
        return there.decode(errors="replace") if isinstance(there, bytes) else there

    def delete(self, key: str) -> None:
        self._call("delete_key", self.key(key))

    def add(self, key: str, amount: int) -> int:
        return int(self._call("add", self.key(key), amount))

    def check_stop(self) -> None:
        flag = self.read(STOP)
        if flag is not None:
            if self.node > 0:  # node 0's store stays up until every other node has seen the flag
                self.set(stop_seen_key(self.node), "1")
                self.add(STOP_SEEN, 1)
            raise JobStopped(flag.signal, flag.reason)

    # --- a generation ------------------------------------------------------------------------------------
    def enter(self, proposed: int, coordinator: bool, failures: int, poll: float = 0.1) -> tuple[int, int]:
        """(generation, failures) this node runs with: node 0 opens `proposed` with its failure count (the job's
        budget used); the others wait for a generation that is open (opened, not yet running, not decided) and
        take node 0's numbers. JobStopped / StoreLost end the wait."""
        self.check_stop()
        if coordinator:
            self.set(gen_key(proposed, "open"), str(time.time()))
            self.put(GENERATION, OpenedGeneration(proposed, failures))
            return proposed, failures
        self.set(node_key(self.node), str(time.time()))  # node 0's store lingers for the nodes it knows, after a stop
        while True:
            self.check_stop()
            opened = self.read(GENERATION)
            if opened is not None:
                generation = opened.generation
                if self.get(gen_key(generation, "decided")) is None \
                        and self.get(gen_key(generation, "running")) is None:
                    return generation, opened.failures
            time.sleep(poll)

    def register(self, generation: int, member: Member, expected: int) -> None:
        self.put(member_key(generation, member.node), member)
        if member.group_rank >= 0:
            self.set(gen_key(generation, "rank", member.group_rank), str(member.node))
        if self.add(gen_key(generation, "registered"), 1) >= expected:
            self.set(gen_key(generation, "running"), "1")

    def registered(self, generation: int) -> int:
        return self.add(gen_key(generation, "registered"), 0)

    def node_at(self, generation: int, group_rank: int) -> int | None:
        """The node that torch's rendezvous gave group rank `group_rank`, once it registered."""
        text = self.get(gen_key(generation, "rank", group_rank))
        return None if text is None else int(text)

    def member(self, generation: int, node: int) -> Member | None:
        return self.read(member_key(generation, node))

    def members(self, generation: int, max_nodes: int) -> list[Member]:
        found = (self.read(member_key(generation, node)) for node in range(max_nodes))
        return [member for member in found if member is not None]

    def beat(self, generation: int) -> None:
        self.add(gen_key(generation, "beat", self.node), 1)

    def beat_count(self, generation: int, node: int) -> int:
        return self.add(gen_key(generation, "beat", node), 0)

    def publish(self, generation: int, outcome: NodeOutcome) -> bool:
        """A node's outcome, if none was published for it yet (its own, or its watcher's saying it is lost: the
        first stands); a failed one raises the generation's alarm, which every node reads. False when one was; if
        that one failed, the alarm is raised again, as its publisher may have died before it raised it.

        The outcome is written in one request: a node that dies while it publishes (its pai-launch killed as its
        workers end) leaves its outcome whole or absent. A claim written first would be left without an outcome,
        and its watcher, finding the node claimed, would stop watching a node that nobody will ever hear from."""
        if not self.put_first(result_key(generation, outcome.node), outcome):
            there = self.outcome(generation, outcome.node)
            if there is not None and peer_failed(there):
                self.raise_alarm(generation)
            return False
        self.add(gen_key(generation, "published"), 1)
        if peer_failed(outcome):
            self.raise_alarm(generation)
        return True

    def published(self, generation: int) -> int:
        return self.add(gen_key(generation, "published"), 0)

    def all_outcomes(self, generation: int, members: int) -> list[NodeOutcome] | None:
        """Every registered member's outcome in four requests, whatever `members` is (group ranks 0..members-1 each
        named its node at registration); None when one of the keys is not there (a member that never learnt its
        group rank, one lost): then they are read one by one."""
        nodes = self._all([gen_key(generation, "rank", rank) for rank in range(members)])
        if nodes is None or not all(text.isdigit() for text in nodes):
            return None
        texts = self._all([result_key(generation, int(node)).name for node in nodes])
        return None if texts is None else [STORE.decode(text, expect=NodeOutcome) for text in texts]

    def _all(self, names: list[str]) -> list[str] | None:
        """The values at every key in `names` in two requests (torch's multi_get), unsealed; None when one is absent
        or fails its check."""
        keys = [self.key(name) for name in names]
        if not self._call("check", keys):
            return None
        values = self._call("multi_get", keys)
        texts = [unseal(self.secret, name, value.decode(errors="replace"))
                 for name, value in zip(names, values, strict=True)]
        return None if any(text is None for text in texts) else texts

    def raise_alarm(self, generation: int) -> None:
        self.add(gen_key(generation, "alarm"), 1)

    def alarm(self, generation: int) -> int:
        """How many times a node failed or saw a peer lost in this generation: one read, however many nodes."""
        return self.add(gen_key(generation, "alarm"), 0)

    def report_lost(self, generation: int, member: Member, why: str) -> bool:
        """`member` is lost, as the node watching it saw it: its outcome says so unless it published one first
        (False then: read that)."""
        return self.publish(generation, NodeOutcome(member.node, member.host, lost=why))

    def report_missing(self, generation: int, why: str) -> None:
        """Nodes of the rendezvous never registered (they have no group rank to stand for); the alarm raised."""
        self.set(gen_key(generation, "missing"), why)
        self.raise_alarm(generation)

    def missing(self, generation: int) -> str | None:
        return self.get(gen_key(generation, "missing"))

    def outcome(self, generation: int, node: int) -> NodeOutcome | None:
        return self.read(result_key(generation, node))

    def abandon(self, generation: int) -> None:
        """This generation never ran here (its rendezvous failed): nobody may join it any more."""
        self.set(gen_key(generation, "decided"), "abandoned")

    def decided(self, generation: int) -> None:
        self.set(gen_key(generation, "decided"), "1")
        self.add(gen_key(generation, "read"), 1)

    def read_count(self, generation: int) -> int:
        return self.add(gen_key(generation, "read"), 0)
