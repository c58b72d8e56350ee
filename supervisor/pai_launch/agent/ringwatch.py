"""Which peer this node watches while the workers run, so the store's load stays linear in the nodes.

Every node watching every other costs the store N reads per node per beat: N^2 in all, which one store cannot
serve at a thousand nodes. Instead the members form a ring by torch's group rank and each node watches only the
next one: a beat count that stops moving for LOST_AFTER makes the watcher publish the peer's outcome as lost
(unless the peer published its own first: the first outcome for a node stands) and so raise the generation's
alarm, one counter every node reads each beat (storelink.alarm). A node that never registers is seen through the
count of registered nodes. Per node and beat that is a constant number of store operations: its own beat, the
stop flag, the alarm, its peer's beat (and the count until every node registered).

When the generation's end stalls, PendingWatch covers the members whose outcome has not come: their watcher may
be gone too (two neighbours on one lost machine), so every node then watches those itself, the same way.
"""

from __future__ import annotations

from pai_launch.wire import crossnode
from pai_launch.wire.storelink import StoreLink
from pai_launch.wire.storevalues import Member


def lost_why(member: Member | None) -> str:
    """The same words on every node, whichever node saw it: decisions compare equal."""
    host = member.host if member is not None else "?"
    return f"({host}) stopped responding: no heartbeat for {crossnode.LOST_AFTER:.0f} s"


def missing_why(missing: int) -> str:
    return f"{missing} node(s) of the rendezvous never reported in (their pai-launch or machine is gone)"


class RingWatch:
    """This node's watch on the next group rank's node; what it found lost goes in `lost` (node -> why)."""

    def __init__(self, link: StoreLink, generation: int, node: int) -> None:
        self.link, self.generation, self.node = link, generation, node
        self.lost: dict[int, str] = {}
        self._beats = crossnode.Beats()
        self._peer: Member | None = None
        self._complete = False

    def check(self, now: float, group_rank: int, expected: int, registered_at: float) -> bool:
        """One beat's look: True when it found a node lost (the verdict is published and the alarm raised)."""
        return self._check_registered(now, expected, registered_at) | self._check_peer(now, group_rank, expected)

    def _check_registered(self, now: float, expected: int, registered_at: float) -> bool:
        if self._complete:
            return False
        registered = self.link.registered(self.generation)
        self._complete = registered >= expected
        if self._complete or now - registered_at < crossnode.LOST_AFTER or -1 in self.lost:
            return False
        self.lost[-1] = missing_why(expected - registered)
        self.link.report_missing(self.generation, self.lost[-1])
        return True

    def _check_peer(self, now: float, group_rank: int, expected: int) -> bool:
        if expected <= 1 or group_rank < 0:
            return False
        if self._peer is None:
            node = self.link.node_at(self.generation, (group_rank + 1) % expected)
            self._peer = None if node is None else self.link.member(self.generation, node)
            if self._peer is None:
                return False  # not registered yet: _check_registered covers one that never does
        peer = self._peer.node
        if peer in self.lost or peer in (self.node, -1):
            return False
        self._beats.update(peer, self.link.beat_count(self.generation, peer), now)
        if not self._beats.lost(now):
            return False
        if not self.link.report_lost(self.generation, self._peer, lost_why(self._peer)):
            self._peer = Member(-1, "", -1, ())  # it published its own outcome: nothing left to watch
            return False
        self.lost[peer] = lost_why(self._peer)
        return True


class PendingWatch:
    """At a stalled generation end, the members whose outcome has not come: lost once their beat stood still here
    for LOST_AFTER (published as such, unless their own outcome came first)."""

    def __init__(self, link: StoreLink, generation: int) -> None:
        self.link, self.generation = link, generation
        self._beats = crossnode.Beats()

    def lost(self, pending: list[Member], now: float) -> list[int]:
        """The nodes of `pending` this look published as lost; their outcomes (and any that came) read next."""
        found = []
        for member in pending:
            self._beats.update(member.node, self.link.beat_count(self.generation, member.node), now)
            if member.node in self._beats.lost(now) and self.link.report_lost(self.generation, member,
                                                                              lost_why(member)):
                found.append(member.node)
        return found
