"""The Slurm allocation pai-launch runs in, read from the SLURM_* variables of its environment.

A node's identity (its rank among the job's nodes) comes from Slurm's own variables, never from the
hostname: several nodes, fake or real, may share one. The first host of the job's node list is the
rendezvous host. What is read here is only a default: explicit command-line options win, and the caller
applies them. Inside a batch script (not under srun) SLURM_NODEID is 0 while the job may have several
nodes; that is returned as it is.

A problem is a SlurmError whose message is one line naming the problem and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pai_launch.wire.errors import LaunchError

#: The usual fix for SLURM_* variables that Slurm itself would never have set this way.
ENV_FIX = ("run pai-launch in the Slurm job's own environment (sbatch, salloc or srun), "
           "or unset SLURM_JOB_ID to run without Slurm")
#: Under srun the job step's own (a step may use part of the allocation; SLURM_NODEID counts within it), else the job's.
NODE_COUNT_VARIABLES = ("SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
NODELIST_VARIABLES = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
#: Every SLURM_* variable a launch reads (pai-launch env shows them).
READ_VARIABLES = ("SLURM_JOB_ID", *NODE_COUNT_VARIABLES, *NODELIST_VARIABLES, "SLURM_NODEID", "SLURM_GPUS_ON_NODE",
                  "SLURM_RESTART_COUNT", "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS")
#: The most hosts a node list may expand to; checked before any list is built.
MAX_HOSTS = 100_000


class SlurmError(LaunchError, ValueError):
    """A problem with the Slurm environment; the message is one line naming the problem and the fix."""


class _BadNodelist(Exception):
    """Why a node list cannot be expanded; each caller words the SlurmError its own way."""


@dataclass(frozen=True)
class SlurmAllocation:
    """This node's view of the Slurm job it runs in."""

    job_id: str
    nnodes: int
    node_rank: int
    first_host: str
    hosts: tuple[str, ...]
    gpus_on_node: int | None
    restart_count: int
    #: Field name -> the SLURM_* variable its value was read from (for --dry-run); defaults are not listed.
    source: dict[str, str] = field(default_factory=dict, hash=False)


def expand_nodelist(text: str) -> tuple[str, ...]:
    """Expand a Slurm host list such as 'gpu[01-04,07]' into host names, in order, zero padding kept."""
    try:
        return _expand(text)
    except _BadNodelist as reason:
        raise SlurmError(f"node list {text!r} cannot be parsed: {reason}; "
                         f"write it the way Slurm does, e.g. 'gpu[01-04,07]' or 'node1,node3'") from None


def from_env(env: Mapping[str, str]) -> SlurmAllocation | None:
    """The allocation described by `env`, or None outside a Slurm job (no SLURM_JOB_ID)."""
    job_id = _value(env, "SLURM_JOB_ID")
    if job_id is None:
        return None
    source = {"job_id": "SLURM_JOB_ID"}
    nnodes = _node_count(env, source)
    hosts = _hosts(env, nnodes, source)
    return SlurmAllocation(
        job_id=job_id,
        nnodes=nnodes,
        node_rank=_node_rank(env, nnodes, source),
        first_host=hosts[0],
        hosts=hosts,
        gpus_on_node=_gpus_on_node(env, source),
        restart_count=_restart_count(env, source),
        source=source,
    )


def _expand(text: str) -> tuple[str, ...]:
    """Expand a Slurm host list: hosts split by top-level commas, each with any number of bracket groups.

    Written here because the common library's licence does not fit this project's, and hand-written
    parsers elsewhere broke on real names; tests/unit/test_slurm.py holds the tricky cases. A bracket
    group is a comma list of numbers and lo-hi ranges; a range keeps the width of its lower bound
    ('098-101' gives 098 ... 101). Several groups give every combination, leftmost group outermost.
    Order and duplicates are kept; anything Slurm never writes is a _BadNodelist. No recursion.
    """
    if not text:
        raise _BadNodelist("it names no host")
    if re.search(r"\s", text):
        raise _BadNodelist("a host name contains whitespace")
    patterns, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            if depth:
                raise _BadNodelist("nested brackets")
            depth = 1
        elif char == "]":
            if not depth:
                raise _BadNodelist("unbalanced brackets")
            depth = 0
        elif char == "," and not depth:
            patterns.append(text[start:index])
            start = index + 1
    if depth:
        raise _BadNodelist("unbalanced brackets")
    patterns.append(text[start:])
    if not any(patterns):
        raise _BadNodelist("it names no host")
    parsed, total = [], 0
    for pattern in patterns:
        if not pattern:
            raise _BadNodelist("an empty host name between commas")
        parts = re.split(r"\[([^\]]*)\]", pattern)  # literal, group, literal, ..., literal
        groups, count = [], 1
        for inside in parts[1::2]:
            groups.append(_group(inside))
            count *= len(groups[-1])
            if total + count > MAX_HOSTS:  # before any host is built
                raise _BadNodelist(f"it expands to more than {MAX_HOSTS} hosts")
        total += count
        parsed.append((parts, groups))
    hosts: list[str] = []
    for parts, groups in parsed:
        names = [parts[0]]
        for group, literal in zip(groups, parts[2::2]):
            names = [name + number + literal for name in names for number in group]
        hosts.extend(names)
    return tuple(hosts)


def _group(text: str) -> list[str]:
    """The numbers, as written, that the inside of one bracket group names, e.g. '01-03,07'."""
    if not text:
        raise _BadNodelist("empty brackets")
    numbers: list[str] = []
    for item in text.split(","):
        if not item:
            raise _BadNodelist("an empty item between commas in brackets")
        match = re.fullmatch(r"([0-9]{1,18})(?:-([0-9]{1,18}))?", item)  # 18 digits: int() stays cheap
        if match is None:
            raise _BadNodelist(f"bad range {item!r}: write a number or lo-hi in digits, e.g. 01-04")
        lo, hi = match.group(1), match.group(2)
        if hi is None:
            numbers.append(lo)
        elif int(lo) > int(hi):
            raise _BadNodelist(f"bad range {item!r}: its start is above its end")
        elif len(numbers) + int(hi) - int(lo) >= MAX_HOSTS:
            raise _BadNodelist(f"it expands to more than {MAX_HOSTS} hosts")
        else:
            numbers.extend(str(number).zfill(len(lo)) for number in range(int(lo), int(hi) + 1))
    return numbers


def _value(env: Mapping[str, str], name: str) -> str | None:
    """The variable's value; an empty one counts as unset (as in `SLURM_JOB_ID= pai-launch ...`)."""
    value = env.get(name)
    return value if value else None


def _first_set(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | tuple[None, None]:
    """(name, value) of the first of `names` that is set."""
    for name in names:
        value = _value(env, name)
        if value is not None:
            return name, value
    return None, None


def _natural(text: str) -> int | None:
    """The integer 0, 1, 2 ... that `text` spells in plain ASCII digits, else None (no sign, space or '٣')."""
    return int(text) if text.isascii() and text.isdigit() else None


def _node_count(env: Mapping[str, str], source: dict[str, str]) -> int:
    name, text = _first_set(env, NODE_COUNT_VARIABLES)
    if name is None:
        raise SlurmError(f"SLURM_JOB_ID is set but neither SLURM_JOB_NUM_NODES nor SLURM_NNODES is: {ENV_FIX}")
    nnodes = _natural(text)
    if not nnodes:
        raise SlurmError(f"{name} {text!r} is not a positive integer: {ENV_FIX}")
    source["nnodes"] = name
    return nnodes


def _hosts(env: Mapping[str, str], nnodes: int, source: dict[str, str]) -> tuple[str, ...]:
    name, text = _first_set(env, NODELIST_VARIABLES)
    if name is None:
        raise SlurmError(f"SLURM_JOB_ID is set but neither SLURM_JOB_NODELIST nor SLURM_NODELIST is: {ENV_FIX}")
    try:
        hosts = _expand(text)
    except _BadNodelist as reason:
        raise SlurmError(f"{name} {text!r} cannot be parsed: {reason}; {ENV_FIX}") from None
    _check_host_count(name, text, hosts, nnodes, source["nnodes"])
    _check_no_repeated_host(name, text, hosts)
    source["hosts"] = source["first_host"] = name
    return hosts


def _check_host_count(name: str, text: str, hosts: tuple[str, ...], nnodes: int, count_name: str) -> None:
    if len(hosts) != nnodes:
        raise SlurmError(f"{name} {text!r} names {len(hosts)} host(s) but {count_name} is {nnodes}: "
                         f"the job's node list and node count must agree; {ENV_FIX}")


def _check_no_repeated_host(name: str, text: str, hosts: tuple[str, ...]) -> None:
    """Slurm names each node of a job once: a repeat means the list was not written by Slurm."""
    seen: set[str] = set()
    for host in hosts:
        if host in seen:
            raise SlurmError(f"{name} {text!r} names host {host!r} more than once: "
                             f"each node of a Slurm job appears once; {ENV_FIX}")
        seen.add(host)


def _node_rank(env: Mapping[str, str], nnodes: int, source: dict[str, str]) -> int:
    text = _value(env, "SLURM_NODEID")
    if text is None:
        raise SlurmError("SLURM_NODEID is not set (sbatch scripts and srun set it): start pai-launch with srun, "
                         "one per node, or give the node rank on the command line")
    node_rank = _natural(text)
    if node_rank is None or node_rank >= nnodes:
        raise SlurmError(f"SLURM_NODEID {text!r} is not an integer from 0 to {nnodes - 1} "
                         f"(the job has {nnodes} node(s)): {ENV_FIX}")
    source["node_rank"] = "SLURM_NODEID"
    return node_rank


def _gpus_on_node(env: Mapping[str, str], source: dict[str, str]) -> int | None:
    """SLURM_GPUS_ON_NODE, or None when Slurm allocated no GPUs by count (the caller then looks for itself)."""
    return _optional_count(env, "SLURM_GPUS_ON_NODE", "gpus_on_node", source)


def _restart_count(env: Mapping[str, str], source: dict[str, str]) -> int:
    """How many times Slurm has requeued this job; 0 on its first run (Slurm sets the variable only after one)."""
    count = _optional_count(env, "SLURM_RESTART_COUNT", "restart_count", source)
    return 0 if count is None else count


def _optional_count(env: Mapping[str, str], name: str, field_name: str, source: dict[str, str]) -> int | None:
    text = _value(env, name)
    if text is None:
        return None
    count = _natural(text)
    if count is None:
        raise SlurmError(f"{name} {text!r} is not a non-negative integer: {ENV_FIX}")
    source[field_name] = name
    return count


# --- what a launch takes from the allocation ---------------------------------------------------------------
#: The rendezvous port inside Slurm: derived from the job id, so two jobs sharing a node do not collide.
PORT_BASE = 29400
PORT_SPAN = 1000


def rendezvous_port(job_id: str) -> int:
    digits = job_id.split("_")[0]  # array jobs: 1234_7
    return PORT_BASE + int(digits) % PORT_SPAN if digits.isdigit() else PORT_BASE


def check_one_task_per_node(allocation: SlurmAllocation, env: Mapping[str, str]) -> None:
    """pai-launch runs once per node: under srun (one task per node) when the job has several nodes."""
    run = "run it as `srun --ntasks-per-node=1 pai-launch ...` (see scripts/slurm/pai-launch.sbatch)"
    if allocation.nnodes > 1 and _value(env, "SLURM_STEP_ID") is None:
        raise SlurmError(f"this Slurm job has {allocation.nnodes} nodes but pai-launch is not running under srun "
                         f"(SLURM_STEP_ID is unset), so it would run on one node only: {run}")
    tasks, nodes = _natural(env.get("SLURM_STEP_NUM_TASKS", "")), _natural(env.get("SLURM_STEP_NUM_NODES", ""))
    if tasks is not None and nodes is not None and tasks > nodes:
        raise SlurmError(f"this job step runs {tasks} tasks on {nodes} node(s): pai-launch starts the workers itself, "
                         f"{run}")


def taken(allocation: SlurmAllocation, used: dict[str, object]) -> list[str]:
    """--dry-run's account of what came from Slurm: 'name value (VARIABLE)' for each value used."""
    where = {"nnodes": "nnodes", "node_rank": "node_rank", "rdzv_endpoint": "first_host", "rdzv_id": "job_id",
             "nproc": "gpus_on_node"}
    lines = []
    for option, value in used.items():
        variable = allocation.source.get(where[option], "")
        detail = {"rdzv_endpoint": f"first host of {variable}, port from the job id",
                  "rdzv_id": "SLURM_JOB_ID"}.get(option, variable)
        lines.append(f"--{option.replace('_', '-')} {value} ({detail})")
    return lines
