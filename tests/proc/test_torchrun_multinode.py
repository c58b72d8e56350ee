"""Two nodes on loopback started the way a platform starts torchrun: each from a torchrun command line (as
`python -m pai_launch.torchrun`), and each from torchrun's PET_* variables alone, with no placement option at all.
Both run the whole cycle through a restart, one init run for the job, every rank in one world."""

from __future__ import annotations

import pytest

from tests.proc.job import free_port, summaries, wait_all
from tests.proc.test_torchrun_entry import AS_MODULE

pytestmark = pytest.mark.timeout(150)

JSON_LOGS = {"PAI_LAUNCH_LOG_FORMAT": "json"}


def _ran_the_job_together(scene, nodes) -> None:
    codes = wait_all(nodes, 120)
    assert codes == [0, 0], summaries(nodes)
    records = scene.records()
    assert sum(record["init"] for record in records) == 1, "only node 0 runs the init run"
    workers = [record for record in records if not record["init"]]
    for generation in ("1", "2"):
        ranks = sorted(record["env"]["RANK"] for record in workers if record["env"]["PAI_LAUNCH_GENERATION"]
                       == generation)
        assert ranks == ["0", "1"], (generation, ranks)
    assert {record["env"]["WORLD_SIZE"] for record in workers} == {"2"}
    for rank, node in enumerate(nodes):
        assert [e["generation"] for e in node.events("generation_ended")] == [1, 2]
        assert f"node {rank} of 2" in node.event("job_nodes")["nodes"]
    assert (scene.work / "PAI" / ".training_complete").is_file()


def test_two_nodes_each_started_from_a_torchrun_command_line(scene):
    port = free_port()
    nodes = [scene.start("--nnodes", "2", "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port",
                         str(port), "--node_rank", str(rank), "--max_restarts", "0", entry=AS_MODULE, json_logs=False,
                         env=JSON_LOGS, name=f"node{rank}", script_args=["--generations", "2"]) for rank in (0, 1)]
    _ran_the_job_together(scene, nodes)
    for node in nodes:
        mapped = node.event("torchrun_flag_mapped")
        assert (mapped["flag"], mapped["as_option"]) == ("--max_restarts", "--max-failures 1")


def test_two_nodes_placed_by_pet_variables_alone(scene):
    port = free_port()
    pet = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port)}
    nodes = [scene.start(env={**pet, "PET_NODE_RANK": str(rank)}, name=f"node{rank}",
                         script_args=["--generations", "2"]) for rank in (0, 1)]
    _ran_the_job_together(scene, nodes)
