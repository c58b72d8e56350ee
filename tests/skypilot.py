"""The SkyPilot task (scripts/skypilot/pai-launch.yaml) read as data: its fields, the pai-launch command its `run`
ends with, and the variables SkyPilot's runner gives each node (sky/backends/task_codegen.py: SKYPILOT_NODE_IPS, the
nodes' IPs one a line in rank order; SKYPILOT_NODE_RANK, this node's place in it; SKYPILOT_NUM_NODES;
SKYPILOT_NUM_GPUS_PER_NODE, the GPUs of the task's accelerators)."""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from tests.helpers import REPO

TASK = REPO / "scripts" / "skypilot" / "pai-launch.yaml"
#: Each node's IP in these tests: any address, one per node.
NODE_IP = "10.128.0.{}"


def load_task() -> dict[str, Any]:
    documents = [document for document in yaml.safe_load_all(TASK.read_text()) if document]
    assert len(documents) == 1, f"{TASK.name} holds {len(documents)} documents, not one task"
    return documents[0]


def run_commands(task: dict[str, Any]) -> list[list[str]]:
    """`run`'s commands, one per line, as the shell splits them (comments dropped)."""
    return [words for line in task["run"].splitlines() if (words := shlex.split(line, comments=True))]


def launch_args(task: dict[str, Any]) -> list[str]:
    """The arguments of the pai-launch command that ends `run`."""
    last = run_commands(task)[-1]
    assert last[0] == "pai-launch", f"run ends with {last}, not pai-launch"
    return last[1:]


def node_envs(task: dict[str, Any]) -> list[dict[str, str]]:
    """SkyPilot's variables on each node of the task, node 0 first."""
    nodes = int(task.get("num_nodes", 1))
    accelerators = str(task["resources"]["accelerators"])
    gpus = accelerators.partition(":")[2] or "1"
    ips = "\n".join(NODE_IP.format(rank + 2) for rank in range(nodes))
    return [{"SKYPILOT_NODE_IPS": ips, "SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NUM_NODES": str(nodes),
             "SKYPILOT_NUM_GPUS_PER_NODE": gpus, "SKYPILOT_TASK_ID": f"sky-managed_{task['name']}_1"}
            for rank in range(nodes)]
