"""Where a run sits among machines: the multi-node options, filled in from the Slurm allocation pai-launch runs in
(explicit options win), and the --requeue-on signal. Pure: environment in, values or a one-line error out."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from pai_launch.core import nodes
from pai_launch.core import exitcodes, slurm
from pai_launch.core.spec import PreflightError


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


@dataclass(frozen=True)
class Place:
    nodes: nodes.Nodes
    nproc: int | None
    requeue_on: int | None
    allocation: slurm.SlurmAllocation | None
    #: Option name -> the value taken from Slurm (for --dry-run).
    from_slurm: dict[str, object] = field(default_factory=dict)


def resolve(options: PlaceOptions, env: dict[str, str], visible: tuple[str, ...]) -> Place:
    """NodesError, SlurmError or PreflightError name the first problem."""
    allocation = _allocation(options.use_slurm, env, nnodes_given=options.nnodes is not None)
    used: dict[str, object] = {}
    nnodes, node_rank, endpoint, rdzv_id, nproc = (options.nnodes, options.node_rank, options.endpoint, options.rdzv_id,
                                                   options.nproc)
    if allocation is not None:
        nnodes, node_rank, endpoint, rdzv_id, nproc = _slurm_defaults(allocation, used, nnodes, node_rank, endpoint,
                                                                      rdzv_id, nproc, visible)
    place = _nodes(nnodes or "1", node_rank or 0, endpoint, rdzv_id, options.rdzv_timeout, options.local_addr)
    return Place(place, nproc, requeue_signal(options.requeue_on, allocation), allocation, used)


def _allocation(use_slurm: bool | None, env: dict[str, str], *, nnodes_given: bool) -> slurm.SlurmAllocation | None:
    """The Slurm job pai-launch runs in (unless --no-slurm); SlurmError for an environment that cannot be right."""
    if use_slurm is False:
        return None
    allocation = slurm.from_env(env)
    if allocation is None:
        if use_slurm:
            raise PreflightError("--slurm is given but SLURM_JOB_ID is not set: run inside a Slurm job, or drop --slurm")
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
        raise PreflightError("--requeue-on works inside a Slurm job (SLURM_JOB_ID is not set): drop it, or submit with sbatch")
    return int(signum)


def _nodes(nnodes: str, node_rank: int, endpoint: str | None, rdzv_id: str | None, timeout: float,
           local_addr: str | None) -> nodes.Nodes:
    low, high = nodes.parse_nnodes(nnodes)
    host, port = nodes.parse_endpoint(endpoint) if endpoint is not None else ("localhost", nodes.DEFAULT_PORT)
    spec = nodes.Nodes(min_nodes=low, max_nodes=high, node_rank=node_rank, host=host, port=port, rdzv_id=rdzv_id,
                       rdzv_timeout=timeout, local_addr=local_addr)
    nodes.check(spec, endpoint_given=endpoint is not None)
    return spec


