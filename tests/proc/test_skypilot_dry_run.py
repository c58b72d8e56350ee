"""Each node of the SkyPilot task (scripts/skypilot/pai-launch.yaml) starts pai-launch as its node: the command its
`run` ends with, and SkyPilot's variables for that node, given to the real pai-launch with --dry-run in a working
directory holding a trivial script. Each must plan without error, from SkyPilot's variables alone, which node of how
many it is, at node 0's IP."""

from __future__ import annotations

import pytest

from tests.helpers import launch_env, run_pai_launch
from tests.k8s import parse_args
from tests.skypilot import NODE_IP, launch_args, load_task, node_envs

pytestmark = pytest.mark.timeout(120)

TASK = load_task()


@pytest.mark.parametrize("env", node_envs(TASK), ids=lambda env: f"node{env['SKYPILOT_NODE_RANK']}")
def test_each_node_plans_its_node_of_the_job_at_node_0s_ip(env, tmp_path):
    args = launch_args(TASK)
    script = parse_args(args)[1][0]
    work = tmp_path / "work"
    work.mkdir()
    (work / script).write_text("print('trained')\n")
    rank, nodes = int(env["SKYPILOT_NODE_RANK"]), int(env["SKYPILOT_NUM_NODES"])

    launch, _ = run_pai_launch(["--dry-run", *args], cwd=work, env=launch_env(tmp_path, env), timeout=60,
                               name=f"node{rank}")

    assert launch.popen.returncode == 0, launch.stderr
    endpoint = f"{NODE_IP.format(2)}:29500"
    assert f"nodes: node {rank} of {nodes}, rendezvous store at {endpoint}" in launch.stdout, launch.stdout
    assert f"--local-addr {NODE_IP.format(rank + 2)} (SKYPILOT_NODE_IPS" in launch.stdout, launch.stdout
    assert f"--nproc {env['SKYPILOT_NUM_GPUS_PER_NODE']} (SKYPILOT_NUM_GPUS_PER_NODE)" in launch.stdout
    assert sorted(path.name for path in work.iterdir()) == [script]  # a dry run writes nothing
