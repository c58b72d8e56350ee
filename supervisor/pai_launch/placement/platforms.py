"""The platform pai-launch runs on, read from the variables it sets, and what it says of this node's place: the node
count, this node's rank, node 0's address. Pure: the environment (and the host's name) in, a Placement out.

Each platform is recognised by variables only it sets, and its values are read as it means them. RANK and WORLD_SIZE
are node values only where the platform is known to set them so (a Kubeflow PyTorchJob's pod index and count, a
Volcano job's); anywhere else they may be a process's rank under another launcher and are never read. Like Slurm's
(slurm), these are defaults: the command line, PAI_LAUNCH_* and torchrun's PET_* win, and the caller applies them.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pai_launch.wire.errors import LaunchError

#: Where SageMaker's own torchrun launcher puts node 0's store (sagemaker-training-toolkit).
SAGEMAKER_PORT = 7777
#: torchrun's static rendezvous port, where a platform names the address alone.
DEFAULT_MASTER_PORT = 29500
#: The name of no platform: MASTER_ADDR and NODE_RANK alone.
GENERIC = "the environment"


class PlatformError(LaunchError, ValueError):
    """A platform's variables that cannot be right; the message names the variable and the fix."""


@dataclass
class Placement:
    """What a platform says of this node: option (nnodes, node_rank, rdzv_endpoint; local_addr and nproc where it
    names them) -> value as typed, and for each the variables it came from."""

    platform: str
    #: The variables that told the platform apart.
    marker: str
    values: dict[str, str] = field(default_factory=dict)
    source: dict[str, str] = field(default_factory=dict)

    def taken(self, used: list[str]) -> str:
        """--dry-run's line: the platform, and each option taken from it with its variables."""
        items = "; ".join(f"--{option.replace('_', '-')} {self.values[option]} ({self.source[option]})"
                          for option in used)
        return f"from {self.platform} (detected by {self.marker}): {items or 'nothing (every value was given)'}"


def detect(env: Mapping[str, str]) -> Placement | None:
    """The first platform whose variables are set, with what it says; None: no platform known here."""
    for reader in (_skypilot, _trainer_v2, _volcano, _pytorchjob, _sagemaker, _azureml, _generic):
        placement = reader(env)
        if placement is not None:
            return placement
    return None


def _value(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def _with(placement: Placement, option: str, value: str | None, source: str) -> None:
    """Take `value` for `option`; a node count, rank or worker count must be a plain number (PlatformError naming its
    variable)."""
    if value is None:
        return
    if option in ("nnodes", "node_rank", "nproc") and not (value.isascii() and value.isdigit()):
        raise PlatformError(f"{source.split(',')[0]} {value!r} is not a number: the platform sets it so; unset it, or "
                            f"give --{option.replace('_', '-')}")
    placement.values[option] = value
    placement.source[option] = source


def _endpoint(placement: Placement, env: Mapping[str, str], addr: str, port: str, default_port: int) -> None:
    """MASTER_ADDR[:MASTER_PORT] as node 0's store, where the platform names the master."""
    host = _value(env, addr)
    if host is None:
        return
    given = _value(env, port)
    _with(placement, "rdzv_endpoint", f"{host}:{given or default_port}",
          f"{addr}, {port}" if given else f"{addr}, port {default_port}")


def _skypilot(env: Mapping[str, str]) -> Placement | None:
    """SkyPilot: SKYPILOT_NODE_RANK and SKYPILOT_NODE_IPS, the nodes' IPs one a line in rank order (node 0's first),
    counted by SKYPILOT_NUM_NODES. It names no port, so node 0's store listens on torchrun's; this node's own line is
    the address its workers are reached at (a pod's host name may not resolve on the other nodes). Its GPUs per node
    count the workers where no GPU is visible otherwise, as Slurm's do."""
    rank, text = _value(env, "SKYPILOT_NODE_RANK"), _value(env, "SKYPILOT_NODE_IPS")
    if rank is None or text is None:
        return None
    ips = _ips(text)
    count = _value(env, "SKYPILOT_NUM_NODES")
    placement = Placement("SkyPilot", "SKYPILOT_NODE_RANK and SKYPILOT_NODE_IPS")
    _with(placement, "nnodes", count or str(len(ips)), "SKYPILOT_NUM_NODES" if count else "SKYPILOT_NODE_IPS, counted")
    _with(placement, "node_rank", rank, "SKYPILOT_NODE_RANK")
    if count is not None and int(count) != len(ips):
        raise PlatformError(f"SKYPILOT_NUM_NODES {count!r} does not count the {len(ips)} line(s) of SKYPILOT_NODE_IPS: "
                            "SkyPilot sets them together; run in SkyPilot's own environment, or unset them")
    if int(rank) >= len(ips):
        raise PlatformError(f"SKYPILOT_NODE_RANK {rank!r} has no line among the {len(ips)} of SKYPILOT_NODE_IPS: "
                            "SkyPilot sets them together; run in SkyPilot's own environment, or unset them")
    host = f"[{ips[0]}]" if ":" in ips[0] else ips[0]
    _with(placement, "rdzv_endpoint", f"{host}:{DEFAULT_MASTER_PORT}",
          f"SKYPILOT_NODE_IPS, its first line, port {DEFAULT_MASTER_PORT}")
    _with(placement, "local_addr", ips[int(rank)], "SKYPILOT_NODE_IPS, the line of SKYPILOT_NODE_RANK")
    gpus = _value(env, "SKYPILOT_NUM_GPUS_PER_NODE")
    if gpus != "0":
        _with(placement, "nproc", gpus, "SKYPILOT_NUM_GPUS_PER_NODE")
    return placement


def _ips(text: str) -> list[str]:
    """SKYPILOT_NODE_IPS's lines, each an IP address (PlatformError naming the first that is not)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for number, line in enumerate(lines, 1):
        try:
            ipaddress.ip_address(line)
        except ValueError:
            raise PlatformError(f"SKYPILOT_NODE_IPS line {number}, {line!r}, is not an IP address: SkyPilot sets one "
                                "node's IP a line; run in SkyPilot's own environment, or unset it") from None
    return lines


def _trainer_v2(env: Mapping[str, str]) -> Placement | None:
    """Kubeflow Trainer v2 (a JobSet of indexed Jobs): torchrun's PET_* plus the pod's JOB_COMPLETION_INDEX; node 0's
    address (PET_MASTER_ADDR) is a headless service. PET_* is read as torchrun's; the index stands in for the rank."""
    if _value(env, "JOB_COMPLETION_INDEX") is None or not any(key.startswith("PET_") for key in env):
        return None
    placement = Placement("Kubeflow Trainer (JobSet)", "JOB_COMPLETION_INDEX and PET_*")
    _with(placement, "node_rank", _value(env, "JOB_COMPLETION_INDEX"), "JOB_COMPLETION_INDEX, the pod's index")
    return placement


def _pytorchjob(env: Mapping[str, str]) -> Placement | None:
    """Kubeflow PyTorchJob v1: in a pod (KUBERNETES_SERVICE_HOST), with torchrun's PET_* or the operator's master
    service `<job>-master-0` in MASTER_ADDR. Its RANK and WORLD_SIZE are the pod's index and the pod count."""
    if _value(env, "KUBERNETES_SERVICE_HOST") is None:
        return None
    master = _value(env, "MASTER_ADDR") or ""
    if not (any(key.startswith("PET_") for key in env) or re.search(r"-master-0(\.|$)", master)):
        return None
    placement = _mastered("Kubeflow PyTorchJob", "KUBERNETES_SERVICE_HOST with PET_* or MASTER_ADDR", env,
                          ("WORLD_SIZE", "the job's pod count"), ("RANK", "the pod's index"))
    return placement if master else Placement(placement.platform, placement.marker)


def _volcano(env: Mapping[str, str]) -> Placement | None:
    """A Volcano job with its pytorch plugin: MASTER_ADDR, MASTER_PORT, and node-level RANK and WORLD_SIZE, marked by
    the env plugin's VC_TASK_INDEX or the svc plugin's VC_<TASK>_HOSTS."""
    marker = next((key for key in ("VC_TASK_INDEX", "VK_TASK_INDEX") if key in env), None) or next(
        (key for key in sorted(env) if re.fullmatch(r"VC_\w+_HOSTS", key)), None)
    if marker is None or _value(env, "MASTER_ADDR") is None:
        return None
    return _mastered("Volcano", marker, env, ("WORLD_SIZE", "the job's pod count"),
                     ("RANK", "the pod's place: the master 0, worker N N+1"))


def _sagemaker(env: Mapping[str, str]) -> Placement | None:
    """SageMaker: SM_HOSTS (a JSON list) and SM_CURRENT_HOST; the hosts in sorted order are the nodes, the first of
    them node 0, whose store listens where SageMaker's own torchrun launcher puts it."""
    text, current = _value(env, "SM_HOSTS"), _value(env, "SM_CURRENT_HOST")
    if text is None or current is None:
        return None
    try:
        hosts = sorted(json.loads(text))
    except (ValueError, TypeError):
        hosts = None
    if not hosts or not all(isinstance(host, str) for host in hosts) or current not in hosts:
        raise PlatformError(f"SM_HOSTS {text!r} is not a JSON list of host names holding SM_CURRENT_HOST {current!r}: "
                            "run in SageMaker's own environment, or unset SM_HOSTS")
    placement = Placement("SageMaker", "SM_HOSTS and SM_CURRENT_HOST")
    _with(placement, "nnodes", str(len(hosts)), "SM_HOSTS, its hosts counted")
    _with(placement, "node_rank", str(hosts.index(current)), "SM_CURRENT_HOST's place in SM_HOSTS, sorted")
    _with(placement, "rdzv_endpoint", f"{hosts[0]}:{SAGEMAKER_PORT}", f"the first host of SM_HOSTS, sorted; port "
                                                                     f"{SAGEMAKER_PORT} as SageMaker's torchrun")
    return placement


def _azureml(env: Mapping[str, str]) -> Placement | None:
    """Azure Machine Learning: AZUREML_* marks it; NODE_RANK, MASTER_ADDR and MASTER_PORT place the node, and
    AZUREML_NODE_COUNT counts the nodes (its WORLD_SIZE and RANK count processes, and are never read)."""
    marker = next((key for key in sorted(env) if key.startswith("AZUREML_")), None)
    if marker is None:
        return None
    return _mastered("Azure Machine Learning", marker, env, ("AZUREML_NODE_COUNT", ""), ("NODE_RANK", ""))


def _generic(env: Mapping[str, str]) -> Placement | None:
    """No platform known, but the usual MASTER_ADDR, MASTER_PORT and NODE_RANK (never RANK or WORLD_SIZE)."""
    if _value(env, "NODE_RANK") is None or _value(env, "MASTER_ADDR") is None:
        return None
    return _mastered(GENERIC, "NODE_RANK and MASTER_ADDR", env, None, ("NODE_RANK", ""))


def _mastered(platform: str, marker: str, env: Mapping[str, str], count: tuple[str, str] | None,
              rank: tuple[str, str]) -> Placement:
    """A platform that names node 0 as MASTER_ADDR and MASTER_PORT: the node count and this node's rank from the
    variables it sets them in, each (variable, what it holds there)."""
    placement = Placement(platform, marker)
    for option, read in (("nnodes", count), ("node_rank", rank)):
        if read is not None:
            _with(placement, option, _value(env, read[0]), f"{read[0]}, {read[1]}" if read[1] else read[0])
    _endpoint(placement, env, "MASTER_ADDR", "MASTER_PORT", DEFAULT_MASTER_PORT)
    return placement


def node_rank_by_host(hostname: str, rendezvous_host: str) -> tuple[int, str] | None:
    """This node's rank where only the rendezvous host is known (an elastic PyTorchJob's `<job>-worker-0`): 0 on that
    host itself, N on `<job>-worker-N` (the pod's index in its name); None when its name says nothing."""
    mine, theirs = hostname.split(".")[0], rendezvous_host.split(".")[0]
    if mine == theirs:
        return 0, f"this host, {hostname}, is the rendezvous host"
    match, host_match = re.fullmatch(r"(.+-)(\d+)", mine), re.fullmatch(r"(.+-)0", theirs)
    if match and host_match and match.group(1) == host_match.group(1):
        return int(match.group(2)), f"the pod's index in its host name, {hostname}, beside the rendezvous host's"
    return None
