"""agent.launchconfig: the installed torch's LaunchConfig for one node's generation and for a multi-node job's."""

from __future__ import annotations

from pai_launch.agent import launchconfig
from pai_launch.wire.protocol import GenerationRequest, NodeRequest

NODES = NodeRequest(node_rank=1, min_nodes=2, max_nodes=3, host="node0", port=29500, rdzv_timeout=60.0, job_id="job",
                    save_dir="/save", fs_settle=5.0, local_addr="10.0.0.2")


def _request(tmp_path, nodes: NodeRequest | None = None) -> GenerationRequest:
    return GenerationRequest(generation=3, nproc=2, python="python3", args=("-u", "train.py"), env={},
                             log_dir=str(tmp_path / "generation-3"), grace=7.5, elastic_run_id="pai-run-3", nodes=nodes)


def _shared(config) -> tuple:
    """The fields every generation shares (shutdown_timeout: int(grace), where this torch has it)."""
    return (config.nproc_per_node, config.rdzv_backend, config.max_restarts, config.monitor_interval,
            config.start_method, getattr(config, "shutdown_timeout", 7))


def test_one_nodes_workers_meet_alone_on_a_port_the_launcher_picks(tmp_path):
    config = launchconfig.single_node(_request(tmp_path), "spawn")
    assert (config.min_nodes, config.max_nodes, config.run_id,
            config.rdzv_endpoint) == (1, 1, "pai-run-3", "localhost:0")
    assert _shared(config) == (2, "c10d", 0, 0.1, "spawn", 7)


def test_a_multi_node_generation_meets_in_the_jobs_store_on_the_generations_own_id(tmp_path):
    config = launchconfig.multi_node(_request(tmp_path, NODES), 5, "forkserver")
    assert (config.min_nodes, config.max_nodes, config.rdzv_endpoint,
            config.local_addr) == (2, 3, "node0:29500", "10.0.0.2")
    assert config.run_id == "job-g5"
    # torch's c10d handler reads join_timeout (a "timeout" key is ignored: every join waited torch's 600 s)
    assert config.rdzv_configs["is_host"] is False and config.rdzv_configs["join_timeout"] == 60
    assert config.rdzv_configs["last_call_timeout"] == int(launchconfig.LAST_CALL)
    assert _shared(config) == (2, "pai-c10d", 0, 0.1, "forkserver", 7)


def test_the_join_timeout_is_what_torchs_handler_reads_as_the_rendezvous_timeout(tmp_path):
    from dataclasses import replace

    from torch.distributed.elastic.rendezvous.api import RendezvousParameters
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _get_timeout

    config = launchconfig.multi_node(_request(tmp_path, replace(NODES, rdzv_timeout=7.5)), 3, "spawn")
    params = RendezvousParameters("c10d", "node0:29500", "run", 2, 3, **config.rdzv_configs)
    assert _get_timeout(params, "join").total_seconds() == 8  # at least the seconds asked for
