"""How the nodes of a multi-node job agree, through the job's store (torch's TCPStore, served by node 0).

Every key below is stored under the job's secret (storelink.StoreLink, jobsecret.py): its name a keyed hash, its
value sealed, so only the job's nodes can write what the others read. Per generation G (keys
pai/g<G>/...): node 0's agent opens G; the other agents wait for an open generation and join it,
so a restarted node never runs a generation number of its own. Once its
workers run, each agent registers its node (host, group rank, global ranks) and beats every
BEAT_INTERVAL; it stops its workers promptly when a peer stops beating, fails, or the job is asked to
stop. When its workers are gone it publishes its node's result and reads every member's, so every
node reports the same combined outcome to its pai-launch.

Here: the key names, the timings, and how the nodes' outcomes combine and a lost member is seen; plain code the
supervisor's tests drive. The values themselves are storevalues.py's; the client that reads and writes them is
storelink.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from pai_launch.wire import codec, failure_causes
from pai_launch.wire.protocol import WorkerFailure
from pai_launch.wire.storevalues import JobFacts, Member, NodeOutcome, OpenedGeneration, StopFlag, StoreInfo


@dataclass(frozen=True)
class ValueKey:
    """A store key that holds one typed value (`value`, a STORE message)."""

    name: str
    value: type

    def encode(self, value) -> str:
        """`value` as the text this key holds; a value of another type is a TypeError (a bug, never sent)."""
        if not isinstance(value, self.value):
            raise TypeError(f"{self.name} holds a {self.value.__name__}, not a {type(value).__name__}")
        return codec.encode_text(value)


BEAT_INTERVAL = 0.5
#: A member whose beat count has not moved for this long is lost (its pai-launch or machine died).
LOST_AFTER = 10.0
#: How long node 0's agent waits for the others to read a generation's outcome before it reports.
READ_WAIT = 5.0

#: Public: what a node needs before it knows the secret. Every other key is under the job's secret
#: (jobsecret.namespaced), StoreLink's doing.
INFO = ValueKey("pai/info", StoreInfo)
FACTS = ValueKey("pai/facts", JobFacts)
#: Node 0's pai-launch is done and its store closes: the store going away now is no loss.
CLOSING = "pai/closing"
CLOSING_SEEN = "pai/closing_seen"
#: How many other nodes' store watchers are connected (each adds 1, and -1 when it leaves).
WATCHING = "pai/watching"
GENERATION = ValueKey("pai/generation", OpenedGeneration)
STOP = ValueKey("pai/stop", StopFlag)
STOP_SEEN = "pai/stop_seen"


#: torch's exception for a rendezvous that did not complete in time: a launcher error naming it ends the run (waiting
#: longer than --rdzv-timeout for nodes would not bound the wait).
RDZV_TIMEOUT = "RendezvousTimeoutError"


def node_key(node: int) -> str:
    return f"pai/node/{node}"


def stop_seen_key(node: int) -> str:
    """Set once node `node`'s agent saw the stop flag: its pai-launch's watch need not carry the stop too."""
    return f"pai/stop_seen/{node}"


def watch_key(node: int) -> str:
    """Set while node `node`'s pai-launch watches the store: node 0's store lingers, at its close, until it is gone."""
    return f"pai/watch/{node}"


def gen_key(generation: int, *parts: object) -> str:
    return "/".join((f"pai/g{generation}", *(str(part) for part in parts)))


def member_key(generation: int, node: int) -> ValueKey:
    return ValueKey(gen_key(generation, "member", node), Member)


def result_key(generation: int, node: int) -> ValueKey:
    return ValueKey(gen_key(generation, "result", node), NodeOutcome)


@dataclass(frozen=True)
class Combined:
    failures: tuple[WorkerFailure, ...] = ()
    error: str | None = None
    fatal: str | None = None


def combine(outcomes: list[NodeOutcome], lost: dict[int, str]) -> Combined:
    """Every node's outcome as one: a fatal problem first, then the earliest real worker failure on any node
    (collateral stops by the launcher, and ranks whose logs say a peer went away, after it), else a lost node; the
    same on every node.

    `lost`: node -> why it is lost; node -1 stands for nodes that never said which they were."""
    fatal = next((o.fatal for o in sorted(outcomes, key=lambda o: o.node) if o.fatal), None)
    failures = sorted((f for o in outcomes for f in o.failures),
                      key=lambda f: (f.collateral, failure_causes.lost_a_peer(f.log_tail), f.at, f.rank))
    errors = [why if node < 0 else f"node {node} {why}" for node, why in sorted(lost.items())]
    errors += [f"node {o.node} ({o.host}): {o.error}" for o in sorted(outcomes, key=lambda o: o.node) if o.error]
    # With a node (or the store) gone, torch's own agent may stop the workers before ours does: their SIGTERM or
    # SIGKILL is the loss's doing, not a cause of its own.
    real = [f for f in failures if not f.collateral and not (lost and stopped_by_launcher(f.returncode))]
    if real:
        return Combined(failures=tuple(failures), fatal=fatal)
    if errors:
        return Combined(failures=tuple(failures), error="; ".join(errors), fatal=fatal)
    return Combined(failures=tuple(failures), fatal=fatal)


def stopped_by_launcher(returncode: int) -> bool:
    """SIGTERM/SIGKILL (or 143/137 from a handler): what a launcher sends workers it stops."""
    return returncode in (-15, -9, 143, 137)


def peer_failed(outcome: NodeOutcome) -> bool:
    return bool(outcome.failures or outcome.error or outcome.fatal or outcome.lost)


class Beats:
    """Which members stopped beating: a beat count that has not moved for LOST_AFTER seconds."""

    def __init__(self, lost_after: float = LOST_AFTER) -> None:
        self.lost_after = lost_after
        self._seen: dict[int, tuple[int, float]] = {}

    def update(self, node: int, count: int, now: float) -> None:
        last = self._seen.get(node)
        if last is None or count != last[0]:
            self._seen[node] = (count, now)

    def lost(self, now: float) -> list[int]:
        return [node for node, (_, at) in self._seen.items() if now - at >= self.lost_after]


def one_line(exc: BaseException) -> str:
    """torch's store errors carry C++ frames on later lines: the first line, named."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def generation_rendezvous_id(job_id: str, generation: int) -> str:
    """Each generation (each attempt) rendezvouses under its own id: no stale round is ever joined."""
    return f"{job_id}-g{generation}"
