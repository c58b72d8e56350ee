"""One generation of a multi-node job, in the agent process (see crossnode.py for the agreement).

The agent joins the generation node 0 opened, rendezvouses through torch's c10d handler in the job's
store (is_host=False: no generation's agent owns the store), watches its peers while the workers
run, and reports the outcome every node agreed on. Its workers are stopped within a few seconds when
a peer fails, is lost, or the job is stopped, not after a collective's timeout.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import psutil

from pai_launch.agent import noderesult, ringwatch
from pai_launch.agent.control import AgentControl
from pai_launch.agent.noderesult import NodeFacts
from pai_launch.wire import crossnode
from pai_launch.wire.protocol import GenerationRequest, GenerationResult, WorkerFailure
from pai_launch.wire.storelink import JobStopped, StoreLink, StoreLost
from pai_launch.wire.storevalues import Member, NodeOutcome

#: Seconds, in pai-launch's own tests: this node publishes its outcome this much later than its workers ended (as a
#: node on a loaded machine reports late), a fault hook rather than a slow machine.
REPORT_LATE_TEST_ENV = "PAI_LAUNCH_TEST_REPORT_LATE"


def stop_workers(workers, grace: float) -> None:
    """SIGTERM every worker's process group now, SIGKILL what is left after `grace` (`workers()`: the processes)."""
    def send(signum: int) -> None:
        for child in workers():
            try:
                os.killpg(child.pid, signum)
            except OSError:
                pass

    send(signal.SIGTERM)
    timer = threading.Timer(max(grace, 0.1), send, args=(signal.SIGKILL,))
    timer.daemon = True
    timer.start()


class NodeGeneration:
    """This node's part in generation `generation`: peers watched from a thread, one combined outcome."""

    def __init__(self, request: GenerationRequest, link: StoreLink, generation: int, control: AgentControl) -> None:
        assert request.nodes is not None
        self.request, self.nodes, self.link, self.generation = request, request.nodes, link, generation
        self.control = control
        self.host = socket.gethostname()
        self.watch = None
        self.stopped_by: JobStopped | None = None
        self.lost: dict[int, str] = {}
        self.store_error: str | None = None
        #: Our workers were stopped because of something elsewhere: their exits are collateral.
        self.we_stopped = False
        self.registered_at: float | None = None
        #: time.time() when this agent stopped its workers because of something elsewhere.
        self.stopped_at: float | None = None
        #: A peer's problem that retrying cannot fix, seen before this node's workers ran.
        self.peer_fatal: str | None = None
        #: Called when the generation must end while no worker has started yet (the agent is still in torch's
        #: rendezvous, which would wait out --rdzv-timeout): reports and leaves.
        self.abort = None
        self._last_look = float("-inf")
        self._expected = 0
        self._group_rank = -1
        self._alarm_seen = 0
        #: This node's outcome is out: an alarm from now on may be its own.
        self.published = False
        self._members: dict[int, Member] = {}
        self._register_lock = threading.Lock()
        self._ring = ringwatch.RingWatch(link, generation, request.nodes.node_rank)
        self._done = threading.Event()

    # --- while the workers run -------------------------------------------------------------------------
    def start_monitor(self, watch) -> None:
        self.watch = watch
        threading.Thread(target=self._monitor, name="node-monitor", daemon=True).start()

    def _stop_local(self) -> None:
        if not self.we_stopped:
            self.we_stopped = True
            self.stopped_at = time.time()
            if self.control.stopping is None:  # else this node's pai-launch is stopping the job and signals its own
                # workers, once
                stop_workers(self.watch.processes if self.watch is not None else psutil.Process().children,
                             self.request.grace)
        if self.abort is not None and self.watch is not None and not self.watch.ranks:
            self.abort()

    def _register(self, now: float, *, final: bool = False) -> None:
        """Once the workers' group is known (their environment shows it): this node is a member of the generation.

        `final`: the workers are gone already; if none was seen long enough to read its group, assume the
        smallest job torch would have formed."""
        with self._register_lock:
            if self.registered_at is not None or self.watch is None:
                return
            group = self.watch.group
            if group is None and not final:
                return
            group_rank, group_size = group if group is not None else (-1, self.nodes.min_nodes)
            member = Member(self.nodes.node_rank, self.host, group_rank, tuple(sorted(self.watch.ranks.values())))
            self._expected, self._group_rank = group_size, group_rank
            self.link.register(self.generation, member, expected=group_size)
            self.registered_at = now

    def _refresh_members(self) -> None:
        """Every member read (max_nodes reads): at the generation's end only, not each beat."""
        if len(self._members) < self._expected:
            self._members = {m.node: m for m in self.link.members(self.generation, self.nodes.max_nodes)}

    def _monitor(self) -> None:
        while not self._done.is_set():
            try:
                self._check_once(time.monotonic())
            except JobStopped as stop:
                self.stopped_by = self.stopped_by or stop
                self._stop_local()
            except StoreLost as exc:
                self.store_error = str(exc)
                self._stop_local()
                return
            except Exception as exc:  # noqa: BLE001 - a bug here must end the generation, not leave it unwatched
                self.store_error = f"the node monitor failed: {crossnode.one_line(exc)}"
                self._stop_local()
                return
            # Quick until this node is registered: a peer that dies early should still be named.
            self._done.wait(crossnode.BEAT_INTERVAL if self.registered_at is not None else 0.02)

    def _check_once(self, now: float) -> None:
        """One beat: a constant number of store operations, however many nodes (ringwatch.py). Until this node
        registers, the look at its workers' group is quick and the store's every beat."""
        self._register(now)
        if self.registered_at is None and now - self._last_look < crossnode.BEAT_INTERVAL:
            return
        self._last_look = now
        self.link.beat(self.generation)
        if self.stopped_by is None:
            self.link.check_stop()
        alarm = 0 if self.published else self.link.alarm(self.generation)
        if self.registered_at is None:
            if alarm != self._alarm_seen:  # a peer that cannot run this job (folder not shared) raised it
                self._alarm_seen = alarm
                self._look_for_fatal()
            return
        if alarm:
            self._stop_local()  # a peer failed, or a watcher found one lost
        if self._ring.check(now, self._group_rank, self._expected, self.registered_at):
            self.lost.update(self._ring.lost)
            self._stop_local()

    def _look_for_fatal(self) -> None:
        for node in range(self.nodes.max_nodes):
            outcome = self.link.outcome(self.generation, node) if node != self.nodes.node_rank else None
            if outcome is not None and outcome.fatal:
                self.peer_fatal = outcome.fatal
                self._stop_local()
                return

    # --- once the workers are gone ----------------------------------------------------------------------
    def finish(self, failures: tuple[WorkerFailure, ...], error: str | None, *, ran: bool = False) -> GenerationResult:
        """Publish this node's outcome, read every member's, and return the combined result. `ran`: torch's launcher
        returned normally, so this node's workers ran (and exited 0) even if the watch never saw one; the others
        wait for its outcome like any member's."""
        if self.control.parent_gone:
            return self._gone()
        local = noderesult.local_failures(failures, self.nodes.node_rank, self.host, self.stopped_at)
        own = NodeOutcome(self.nodes.node_rank, self.host, local, error, stopping=self.control.stopping)
        started = ran or self.watch is None or bool(self.watch.ranks) or bool(failures)
        return noderesult.decide(self._settle(own) if started else self._leave(error))

    def _gone(self) -> GenerationResult:
        """This node's pai-launch is gone and the agent killed the workers on its way out: their SIGKILLs are not
        what happened to the generation, so nothing is published. The node's watcher finds it lost, in the same
        words on every node; the result goes nowhere (nobody reads the pipe now)."""
        self._done.set()
        return GenerationResult(self.generation, error="this node's pai-launch is gone",
                                log_dir=self.request.log_dir)

    def _leave(self, error: str | None) -> NodeFacts:
        """No worker ever ran here (the rendezvous failed, or the job ended before it did): nobody waits for this
        node's outcome, and nobody may join this generation any more."""
        self._done.set()
        try:
            self.link.abandon(self.generation)
            if error and crossnode.RDZV_TIMEOUT in error:
                error = self._timed_out()
        except StoreLost:
            pass
        return NodeFacts(self.generation, self.request.log_dir, started=False, error=error, stopped_by=self.stopped_by,
                         store_error=self.store_error, peer_fatal=self.peer_fatal)

    def _timed_out(self) -> str:
        """Torch's rendezvous timed out: the nodes that never reached the job's store, and the option that bounds it."""
        absent = [node for node in range(1, self.nodes.max_nodes) if self.link.get(crossnode.node_key(node)) is None]
        who = f"node(s) {', '.join(map(str, absent))} never reached node 0's store" if absent else \
            "every node reached node 0's store, but not every one joined it"
        return (f"{crossnode.RDZV_TIMEOUT}: not every node joined generation {self.generation} within --rdzv-timeout "
                f"{self.nodes.rdzv_timeout:g} s ({self.nodes.min_nodes} wanted; {who}): start every node with the same "
                f"command and its --node-rank, or raise --rdzv-timeout")

    def _settle(self, own: NodeOutcome) -> NodeFacts:
        """Exchange outcomes with the other members, then say this node has decided; what it knew when it did."""
        late = float(os.environ.get(REPORT_LATE_TEST_ENV) or 0)
        if late > 0:
            time.sleep(late)
        outcomes = self._exchange(own)
        if self.stopped_by is None:
            self.stopped_by = noderesult.stop_among(outcomes)
        # Decided: what the peers did from here on (node 0 leaving once everyone has read) changes nothing.
        self._done.set()
        lost, store_error = dict(self.lost), self.store_error
        try:
            self.link.decided(self.generation)
            if self.nodes.node_rank == 0:
                self._wait_read(len(outcomes))
        except StoreLost:
            pass
        return NodeFacts(self.generation, self.request.log_dir, started=True, outcomes=outcomes, lost=lost,
                         stopped_by=self.stopped_by, store_error=store_error,
                         store=f"{self.nodes.host}:{self.nodes.port}",
                         members=max(1, len(self._members), len(outcomes)))

    def _exchange(self, own: NodeOutcome) -> tuple[NodeOutcome, ...]:
        """This node's outcome published, and every member's read unless the job was stopped or the store is lost."""
        outcomes = {own.node: own}
        try:
            self._register(time.monotonic(), final=True)
            self.published = True
            if not self.link.publish(self.generation, own):
                outcomes = {}  # a watcher published this node as lost first: that stands, here as everywhere
            if self.stopped_by is None:
                outcomes = self._gather(outcomes)
            if self.stopped_by is None:
                self.link.check_stop()  # a stop raised while we gathered still wins over the failures it caused
        except JobStopped as stop:
            self.stopped_by = stop
        except StoreLost as exc:
            self.store_error = self.store_error or str(exc)
        return tuple(outcomes.values())

    def _gather(self, outcomes: dict[int, NodeOutcome]) -> dict[int, NodeOutcome]:
        """Every member's outcome (a lost member's says so: it goes to `lost`). Once the published count says all
        are in, they are read in a few requests however many nodes there are (storelink.all_outcomes). Only when
        that count stands still for LOST_AFTER (a member and its watcher both gone, or one that never registered)
        are they read member by member, every BEAT_INTERVAL (at once when the count is complete but the keys are
        not: a member that never learnt its group rank). `outcomes`: this node's own, as published."""
        outcomes = dict(outcomes)
        if self._expected <= 0:
            return outcomes  # no group was ever formed here: nobody else to wait for
        pending_watch = ringwatch.PendingWatch(self.link, self.generation)
        count, moved, scanned = -1, time.monotonic(), float("-inf")
        while self.store_error is None and self.stopped_by is None:
            now, published = time.monotonic(), self.link.published(self.generation)
            if published >= self._expected:
                everyone = self.link.all_outcomes(self.generation, self._expected)
                if everyone is not None:
                    return self._sort_out({o.node: o for o in everyone})
            count, moved = published, (now if published != count else moved)
            stalled = published >= self._expected or now - moved >= crossnode.LOST_AFTER
            if stalled and now - scanned >= crossnode.BEAT_INTERVAL:
                scanned = now
                if self._scan(outcomes, pending_watch, now):
                    return self._sort_out(outcomes)
            time.sleep(0.1)
        return self._sort_out(outcomes)

    def _sort_out(self, outcomes: dict[int, NodeOutcome]) -> dict[int, NodeOutcome]:
        """The outcomes of members that ended; those that say a member is lost go to `lost`, the same on every node."""
        self.lost.update({node: o.lost for node, o in outcomes.items() if o.lost})
        return {node: o for node, o in outcomes.items() if not o.lost}

    def _scan(self, outcomes: dict[int, NodeOutcome], pending_watch: ringwatch.PendingWatch, now: float) -> bool:
        """Member by member: the outcomes that came (lost ones among them); True when every member has one."""
        self._refresh_members()
        pending = [self._members[node] for node in self._members if node not in outcomes]
        pending_watch.lost(pending, now)
        for member in pending:
            found = self.link.outcome(self.generation, member.node)
            if found is not None:
                outcomes[member.node] = found
        missing = self.link.missing(self.generation) if len(self._members) < self._expected else None
        if missing is not None:
            self.lost.setdefault(-1, missing)
        return all(node in outcomes for node in self._members) and (
            len(self._members) >= self._expected or -1 in self.lost)

    def _wait_read(self, count: int) -> None:
        """Node 0 serves the store: give the others a moment to read the outcome before this node moves on."""
        deadline = time.monotonic() + crossnode.READ_WAIT
        while self.link.read_count(self.generation) < count and time.monotonic() < deadline:
            time.sleep(0.05)
