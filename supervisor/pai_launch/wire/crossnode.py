"""How the nodes of a multi-node job agree, through the job's store (torch's TCPStore, served by node 0).

Every key below is stored under the job's secret (StoreLink, jobsecret.py): its name a keyed hash, its
value sealed, so only the job's nodes can write what the others read. Per generation G (keys
pai/g<G>/...): node 0's agent opens G; the other agents wait for an open generation and join it,
so a restarted node never runs a generation number of its own. Once its
workers run, each agent registers its node (host, group rank, global ranks) and beats every
BEAT_INTERVAL; it stops its workers promptly when a peer stops beating, fails, or the job is asked to
stop. When its workers are gone it publishes its node's result and reads every member's, so every
node reports the same combined outcome to its pai-launch.

Nothing here imports torch: StoreLink wraps a torch TCPStore client that store.client.connect makes (in the agent
and store processes only); combine() and the key names are plain code the supervisor's tests drive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pai_launch.wire import codec
from pai_launch.wire.jobsecret import namespaced, seal, unseal
from pai_launch.wire.protocol import WorkerFailure

#: The values the job's nodes leave in the store for each other (wire.codec), each read back as the type its key
#: names (ValueKey); the other keys are flags and counters whose presence is what counts.
STORE = codec.Protocol("a job store value")


@dataclass(frozen=True)
class ValueKey:
    """A store key that holds one typed value (`value`, a STORE message)."""

    name: str
    value: type

BEAT_INTERVAL = 0.5
#: A member whose beat count has not moved for this long is lost (its pai-launch or machine died).
LOST_AFTER = 10.0
#: How long node 0's agent waits for the others to read a generation's outcome before it reports.
READ_WAIT = 5.0

@STORE.message("info")
@dataclass(frozen=True)
class StoreInfo:
    """Public: that this is a pai-launch job's store and, once node 0 holds the save folder, the secret's digest
    and the file (in the save folder) that holds it."""

    digest: str = ""
    secret_file: str = ""


@STORE.message("facts")
@dataclass(frozen=True)
class JobFacts:
    """What node 0 says of the job, under the secret: a node trusts these, not StoreInfo's."""

    run_id: str
    job_id: str
    #: The command every node must run the same (coordination.job_fingerprint).
    fingerprint: dict[str, Any]
    min_nodes: int
    max_nodes: int


@STORE.message("opened")
@dataclass(frozen=True)
class OpenedGeneration:
    """The generation node 0 opened, with the job's failure count (the budget used), which every node takes."""

    generation: int
    failures: int


@STORE.message("stop")
@dataclass(frozen=True)
class StopFlag:
    """Some node's pai-launch was asked to stop the job (signal number, why)."""

    signal: int
    reason: str


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


@STORE.message("member")
@dataclass(frozen=True)
class Member:
    """A node that runs workers in this generation."""

    node: int
    host: str
    group_rank: int
    ranks: tuple[int, ...]


@STORE.message("outcome")
@dataclass(frozen=True)
class NodeOutcome:
    """One node's end of a generation, as published in the store."""

    node: int
    host: str
    failures: tuple[WorkerFailure, ...] = ()
    error: str | None = None
    fatal: str | None = None
    #: This node's pai-launch was stopping the job (signal number, why) when its workers ended.
    stopping: tuple[int, str] | None = None


@dataclass(frozen=True)
class Combined:
    failures: tuple[WorkerFailure, ...] = ()
    error: str | None = None
    fatal: str | None = None


def combine(outcomes: list[NodeOutcome], lost: dict[int, str]) -> Combined:
    """Every node's outcome as one: a fatal problem first, then the earliest real worker failure on any node
    (collateral stops by the launcher after it), else a lost node; the same on every node.

    `lost`: node -> why it is lost; node -1 stands for nodes that never said which they were."""
    fatal = next((o.fatal for o in sorted(outcomes, key=lambda o: o.node) if o.fatal), None)
    failures = sorted((f for o in outcomes for f in o.failures), key=lambda f: (f.collateral, f.at, f.rank))
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
    return bool(outcome.failures or outcome.error or outcome.fatal)


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


# --- the store client (agent side; imports torch) ---------------------------------------------------------
class StoreLost(Exception):
    """The job's store (node 0's pai-launch) cannot be reached any more."""


class JobStopped(Exception):
    """Some node's pai-launch was asked to stop the job."""

    def __init__(self, signum: int, reason: str) -> None:
        super().__init__(reason)
        self.signum = signum
        self.reason = reason


def one_line(exc: BaseException) -> str:
    """torch's store errors carry C++ frames on later lines: the first line, named."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


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
        if not isinstance(value, key.value):
            raise TypeError(f"{key.name} holds a {key.value.__name__}, not a {type(value).__name__}")
        self.set(key, codec.encode_text(value))

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
                if self.get(gen_key(generation, "decided")) is None and self.get(gen_key(generation, "running")) is None:
                    return generation, opened.failures
            time.sleep(poll)

    def register(self, generation: int, member: Member, expected: int) -> None:
        self.put(member_key(generation, member.node), member)
        if self.add(gen_key(generation, "registered"), 1) >= expected:
            self.set(gen_key(generation, "running"), "1")

    def members(self, generation: int, max_nodes: int) -> list[Member]:
        found = (self.read(member_key(generation, node)) for node in range(max_nodes))
        return [member for member in found if member is not None]

    def beat(self, generation: int) -> None:
        self.add(gen_key(generation, "beat", self.node), 1)

    def beat_count(self, generation: int, node: int) -> int:
        return self.add(gen_key(generation, "beat", node), 0)

    def publish(self, generation: int, outcome: NodeOutcome) -> None:
        self.put(result_key(generation, outcome.node), outcome)

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

def generation_rendezvous_id(job_id: str, generation: int) -> str:
    """Each generation (each attempt) rendezvouses under its own id: no stale round is ever joined."""
    return f"{job_id}-g{generation}"
