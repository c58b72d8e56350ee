"""Where a run sits among machines: the multi-node options, filled in from the Slurm allocation pai-launch runs in or
else the platform it runs on (platforms; explicit options win), this node's rank found from its host name where
the rendezvous is c10d's and no rank is given, and the --requeue-on signal. Pure: environment in, values or a one-line
error out."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from pai_launch.core import exitcodes
from pai_launch.placement import nodes, platforms, slurm
from pai_launch.placement.spec import PreflightError
from pai_launch.wire.errors import LaunchError

#: --rdzv-backend's values: static (a node without a rank is node 0, as torchrun's static rendezvous has it) and c10d
#: (ranks are torchrun's by arrival: a node without one finds it from its host name, or is refused).
BACKENDS = ("static", "c10d")


@dataclass(frozen=True)
class PlaceOptions:
    """The command line's values (None: not given)."""

    nnodes: str | None = None
    node_rank: int | None = None
    endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_timeout: float = nodes.DEFAULT_RDZV_TIMEOUT
    local_addr: str | None = None
    use_slurm: bool | None = None
    requeue_on: str | None = None
    nproc: int | None = None
    rdzv_backend: str | None = None
    #: This machine's host name (for a c10d rendezvous without a node rank).
    hostname: str = ""


@dataclass(frozen=True)
class Place:
    nodes: nodes.Nodes
    nproc: int | None
    requeue_on: int | None
    allocation: slurm.SlurmAllocation | None
    #: Option name -> the value taken from Slurm (for --dry-run).
    from_slurm: dict[str, object] = field(default_factory=dict)
    #: The platform detected outside Slurm, and the options taken from it (for --dry-run).
    platform: platforms.Placement | None = None
    from_platform: list[str] = field(default_factory=list)


def resolve(options: PlaceOptions, env: dict[str, str], visible: tuple[str, ...]) -> Place:
    """NodesError, SlurmError, PlatformError or PreflightError name the first problem."""
    if options.rdzv_backend is not None and options.rdzv_backend not in BACKENDS:
        raise PreflightError(f"--rdzv-backend {options.rdzv_backend!r} is not supported: pai-launch's rendezvous is "
                             f"c10d in a store node 0 serves; give c10d or static")
    allocation = _allocation(options.use_slurm, env, nnodes_given=options.nnodes is not None)
    used: dict[str, object] = {}
    nnodes, node_rank, endpoint, rdzv_id, nproc = (options.nnodes, options.node_rank, options.endpoint, options.rdzv_id,
                                                   options.nproc)
    local_addr = options.local_addr
    placement, from_platform = None, []
    if allocation is not None:
        nnodes, node_rank, endpoint, rdzv_id, nproc = _slurm_defaults(allocation, used, nnodes, node_rank, endpoint,
                                                                      rdzv_id, nproc, visible)
    else:
        placement = platforms.detect(env)
        given = {"nnodes": nnodes, "node_rank": node_rank, "rdzv_endpoint": endpoint, "local_addr": local_addr,
                 "nproc": nproc}
        from_platform = _platform_defaults(placement, given, visible) if placement is not None else []
        nnodes, node_rank, endpoint = given["nnodes"], given["node_rank"], given["rdzv_endpoint"]
        local_addr, nproc = given["local_addr"], given["nproc"]
    if node_rank is None and options.rdzv_backend == "c10d" and endpoint is not None and _multi(nnodes):
        node_rank, placement = _rank_by_host(nnodes or "1", endpoint, options.hostname, placement)
        from_platform.append("node_rank")
    try:
        place = _nodes(nnodes or "1", int(node_rank or 0), endpoint, rdzv_id, options.rdzv_timeout, local_addr)
    except nodes.NodesError as exc:
        raise _by_variable(exc, placement, from_platform, env) from None
    return Place(place, nproc, requeue_signal(options.requeue_on, allocation), allocation, used, placement,
                 from_platform)


def _by_variable(exc: nodes.NodesError, placement: platforms.Placement | None, taken: list[str],
                 env: dict[str, str]) -> LaunchError:
    """A problem with values the platform's variables gave: named by those variables, as they were set, not by the
    options they became (which the user never gave)."""
    named = [option for option in taken if f"--{option.replace('_', '-')} " in str(exc)]
    if placement is None or not named:
        return exc
    said = []
    for option in named:
        variables = [part.strip() for part in placement.source[option].split(",")]
        shown = [f"{name}={env[name]}" for name in variables if name in env]
        why = ", ".join(part for part in variables if part not in env)
        said.append(" and ".join(shown or [placement.source[option]]) + (f" ({why})" if why else ""))
    return platforms.PlatformError(f"{placement.platform}'s {'; '.join(said)} cannot be right: {exc} (as "
                                   f"{', '.join('--' + o.replace('_', '-') for o in named)}): fix the job's "
                                   f"specification, or give the option(s) yourself")


def _multi(nnodes: str | None) -> bool:
    return nodes.parse_nnodes(nnodes or "1")[1] > 1


def _platform_defaults(placement: platforms.Placement, given: dict[str, object], visible: tuple[str, ...]) -> list[str]:
    """Fill what the options left open from the platform's values; the options taken. The environment's own
    MASTER_ADDR and NODE_RANK, known to no platform, count only in a job of several nodes; a platform's worker count
    only where no GPU is visible (the visible GPUs are what the workers get, as under Slurm)."""
    if placement.platform == platforms.GENERIC and not _multi(given["nnodes"]):
        return []
    taken = [option for option in placement.values
             if given.get(option) is None and not (option == "nproc" and visible)]
    for option in taken:
        value = placement.values[option]
        given[option] = int(value) if option in ("node_rank", "nproc") else value
    return taken


def _rank_by_host(nnodes: str, endpoint: str, hostname: str,
                  placement: platforms.Placement | None) -> tuple[int, platforms.Placement]:
    """A c10d rendezvous gives no node rank: node 0 is the rendezvous host, the others are found by their pod's name."""
    host = nodes.parse_endpoint(endpoint)[0]
    found = platforms.node_rank_by_host(hostname, host)
    if found is None:
        raise PreflightError(f"this node's rank is unknown: a c10d rendezvous at {endpoint} gives none, and this host "
                             f"({hostname or 'no name'}) is not the rendezvous host nor named like its pods: set "
                             f"PET_NODE_RANK (or --node-rank) on every node, 0 on {host}")
    rank, why = found
    placement = placement or platforms.Placement("the host name", "a c10d rendezvous without a node rank")
    placement.values["node_rank"], placement.source["node_rank"] = str(rank), why
    return rank, placement


def _allocation(use_slurm: bool | None, env: dict[str, str], *, nnodes_given: bool) -> slurm.SlurmAllocation | None:
    """The Slurm job pai-launch runs in (unless --no-slurm); SlurmError for an environment that cannot be right."""
    if use_slurm is False:
        return None
    allocation = slurm.from_env(env)
    if allocation is None:
        if use_slurm:
            raise PreflightError("--slurm is given but SLURM_JOB_ID is not set: run inside a Slurm job, or drop "
                                 "--slurm")
        return None
    if not nnodes_given:
        slurm.check_one_task_per_node(allocation, env)
    return allocation


def _slurm_defaults(allocation: slurm.SlurmAllocation, used: dict[str, object], nnodes, node_rank, endpoint, rdzv_id,
                    nproc, visible):
    """Fill what the command line left open from the allocation; `used` records what was taken."""
    if nnodes is None:
        nnodes = used["nnodes"] = str(allocation.nnodes)
    if node_rank is None:
        node_rank = used["node_rank"] = allocation.node_rank
    multi = nodes.parse_nnodes(nnodes)[1] > 1
    if endpoint is None and multi:
        endpoint = used["rdzv_endpoint"] = f"{allocation.first_host}:{slurm.rendezvous_port(allocation.job_id)}"
    if rdzv_id is None and multi:
        rdzv_id = used["rdzv_id"] = f"slurm-{allocation.job_id}"
    if nproc is None and not visible and allocation.gpus_on_node:
        nproc = used["nproc"] = allocation.gpus_on_node
    return nnodes, node_rank, endpoint, rdzv_id, nproc


def requeue_signal(name: str | None, allocation: slurm.SlurmAllocation | None) -> int | None:
    if name is None:
        return None
    text = name.upper()
    text = text if text.startswith("SIG") or text.isdigit() else "SIG" + text
    try:
        signum = signal.Signals(int(text)) if text.isdigit() else signal.Signals[text]
    except (KeyError, ValueError):
        signum = None
    if signum not in exitcodes.HANDLED_SIGNALS or signum == signal.SIGINT:
        raise PreflightError(f"--requeue-on {name!r}: give USR1, USR2, TERM or HUP (the signal sbatch --signal sends)")
    if allocation is None:
        raise PreflightError("--requeue-on works inside a Slurm job (SLURM_JOB_ID is not set): drop it, or submit with "
                             "sbatch")
    return int(signum)


def _nodes(nnodes: str, node_rank: int, endpoint: str | None, rdzv_id: str | None, timeout: float,
           local_addr: str | None) -> nodes.Nodes:
    low, high = nodes.parse_nnodes(nnodes)
    if high == 1 and endpoint is not None and endpoint.rpartition(":")[2] == "0":
        endpoint = None  # torchrun's "any free port" on one machine, which is what one node does anyway
    host, port = nodes.parse_endpoint(endpoint) if endpoint is not None else ("localhost", nodes.DEFAULT_PORT)
    spec = nodes.Nodes(min_nodes=low, max_nodes=high, node_rank=node_rank, host=host, port=port, rdzv_id=rdzv_id,
                       rdzv_timeout=timeout, local_addr=local_addr)
    nodes.check(spec, endpoint_given=endpoint is not None)
    return spec


