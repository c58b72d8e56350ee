"""The narrow boundary between the supervisor and the agent process: requests in, reports out.

Each side writes one typed message per line (wire.codec): REQUESTS are what the supervisor sends its agent,
REPORTS what the agent sends back; each direction decodes only its own message types, so a line either side
does not know is an error that names its type. This module imports nothing heavy, so the supervisor can use it
without torch and the agent without typer or watchdog.
"""

from __future__ import annotations

from dataclasses import dataclass

from pai_launch.wire.codec import Protocol

#: supervisor -> agent: a generation, the heartbeat, a cancel, the job's stop.
REQUESTS = Protocol("a request to the agent")
#: agent -> supervisor: ready, joined, a result, the heartbeat's answer, and the agent's changes of state.
REPORTS = Protocol("the agent's report")


@REQUESTS.message("generation")
@dataclass(frozen=True)
class GenerationRequest:
    """Start `nproc` workers running `python ARGS` (or `ARGS` alone: `no_python`) under a fresh elastic rendezvous."""

    generation: int
    nproc: int
    python: str
    args: tuple[str, ...]
    env: dict[str, str]
    log_dir: str
    grace: float
    elastic_run_id: str
    #: Set for a multi-node job: where the job's store is and this node's place in it.
    nodes: NodeRequest | None = None
    #: `args` is the whole command, a program run without `python` (--no-python): never warm.
    no_python: bool = False
    #: (local rank, "stdout" or "stderr") whose lines are not relayed to the console; their files keep them.
    muted: tuple[tuple[int, str], ...] = ()
    #: --log-line-prefix-template (checked by wire.lineprefix): what starts each relayed line, rendered per worker on
    #: its node; None: pai-launch's `[rankN]: `.
    line_prefix_template: str | None = None


@dataclass(frozen=True)
class NodeRequest:
    """A generation of a multi-node job: the rendezvous runs in node 0's store at host:port."""

    node_rank: int
    min_nodes: int
    max_nodes: int
    host: str
    port: int
    rdzv_timeout: float
    #: The job's rendezvous id; each generation rendezvouses as JOB-gN.
    job_id: str
    #: The shared save folder, where node 0's init run must have written (checked by the other nodes).
    save_dir: str
    #: How long a file written on another node may take to show up here (a shared file system's caching).
    fs_settle: float
    local_addr: str | None = None
    #: This node's failure count (node 0's is the job's: the others take it from node 0).
    failures: int = 0
    #: The job's secret (jobsecret.py): every pai-launch key in the store lives under it. Sent over the pipe only.
    secret: str = ""


@REQUESTS.message("stop")
@dataclass(frozen=True)
class StopJob:
    """Sent to an agent (running a generation or not): this node's pai-launch is stopping, so the whole job stops.

    The agent sets the job's stop flag in node 0's store at host:port; every node's agent sees it.
    """

    signum: int
    reason: str
    host: str
    port: int
    secret: str = ""


@REQUESTS.message("ping")
@dataclass(frozen=True)
class Ping:
    """The supervisor's heartbeat: the agent's request reader answers it at once with Pong(seq), even mid-generation."""

    seq: int


@REQUESTS.message("cancel")
@dataclass(frozen=True)
class Cancel:
    """The run is stopping: generation `generation`, if its workers are not started yet, must never start them."""

    generation: int


@REPORTS.message("ready")
@dataclass(frozen=True)
class AgentReady:
    """The agent can take a generation. Its first one is its account of itself: warm workers or cold ones and why,
    what its forkserver preloaded, and the torch and Python it runs."""

    warm: bool
    #: Why not warm (or what warm fell back from); "--cold" when asked for.
    why: str = ""
    preloaded: tuple[str, ...] = ()
    #: Modules the forkserver was asked to preload but could not import.
    missing: tuple[str, ...] = ()
    forkserver: int | None = None
    took_s: float = 0.0
    #: The agent's own helper processes (not workers), by pid.
    helpers: tuple[int, ...] = ()
    torch: str | None = None
    python: str | None = None


@REPORTS.message("joined")
@dataclass(frozen=True)
class Joined:
    """The agent's first report in a multi-node generation: the generation it really joined and the job's failure
    count, as node 0 has them."""

    generation: int
    failures: int


@REPORTS.message("pong")
@dataclass(frozen=True)
class Pong:
    seq: int


@REPORTS.message("stop_raised")
@dataclass(frozen=True)
class StopRaised:
    """The job's stop flag is raised in node 0's store (or could not be: the store is gone)."""


@REPORTS.message("forkserver_restarted")
@dataclass(frozen=True)
class ForkserverRestarted:
    """The agent's forkserver had died; a new one (`pid`) passed the self-check."""

    pid: int
    why: str = ""


@REPORTS.message("went_cold")
@dataclass(frozen=True)
class WentCold:
    """The forkserver died and its successor failed the self-check: workers start cold from now on."""

    why: str


@REPORTS.message("retiring")
@dataclass(frozen=True)
class Retiring:
    """The agent will exit after this generation (why): its successor takes the next."""

    why: str


@dataclass(frozen=True)
class WorkerFailure:
    """One rank that did not exit 0: `returncode` is Popen-style (negative N for signal N)."""

    rank: int
    returncode: int
    pid: int
    log_tail: str = ""
    #: Which node it ran on (--node-rank) and that node's host name.
    node: int = 0
    host: str = ""
    #: When its exit was seen (time.time(), comparable across nodes).
    at: float = 0.0
    #: Stopped by the launcher because something else failed first.
    collateral: bool = False


@REPORTS.message("result")
@dataclass(frozen=True)
class GenerationResult:
    """How a generation ended: no failures means every worker exited 0."""

    generation: int
    failures: tuple[WorkerFailure, ...] = ()
    error: str | None = None
    log_dir: str = ""
    #: Multi-node: the job was stopped by a signal to some node's pai-launch (signal number, why).
    stopped_signal: int | None = None
    stopped_reason: str = ""
    #: Multi-node: a problem retrying cannot fix (the save folder is not shared).
    fatal: str | None = None
    #: Multi-node: the nodes that ran this generation.
    members: int = 1
    #: pai-launch's own machinery failed under the workers (the warm workers' forkserver died): what to say instead
    #: of the ranks' exits, which are its consequence.
    fault: str | None = None
    #: The generation was cancelled (the run is stopping) before any worker was started.
    cancelled: bool = False
