"""Tier 3, several nodes: real torch gloo workers across two pai-launch nodes, and the real perforatedai example on
two "hosts" (network namespaces with their own addresses and host names, one shared save folder)."""

from __future__ import annotations

import json
import signal

import psutil
import pytest

from tests.helpers import REPO, assert_all_gone, launch_env, start_pai_launch, wait_until
from tests.proc.job import free_port, summaries
from tests.proc.launch_files import read_state, wait_event
from tests.real import hosts

EXAMPLE = REPO / "examples" / "train_pai_ddp.py"
ALLREDUCE = REPO / "tests" / "real" / "ddp_allreduce.py"


@pytest.fixture(scope="module")
def two_hosts():
    missing = hosts.missing_tools()
    if missing:
        pytest.skip(missing)
    pair = hosts.create()
    yield pair
    hosts.remove()


def _start(tmp_path, rank: int, port: int, script, *args: str, host: hosts.Host | None = None,
           endpoint: str = "127.0.0.1",
           script_args: tuple[str, ...] = ()):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    pai_args = ["--log-format", "json", "--nnodes", "2", "--node-rank", str(rank), "--rdzv-endpoint",
                f"{endpoint}:{port}",
                *(["--local-addr", host.address] if host else []), *args, str(script), *script_args]
    env = launch_env(tmp_path, {"PYTHONPATH": str(REPO)})
    return start_pai_launch(pai_args, cwd=work, io_dir=tmp_path / "io", env=env, name=f"node{rank}",
                            prefix=host.prefix() if host else ())


def _tree(launch) -> list[psutil.Process]:
    try:
        return [psutil.Process(launch.pid), *psutil.Process(launch.pid).children(recursive=True)]
    except psutil.Error:
        return []


@pytest.mark.timeout(240)
def test_gloo_workers_on_two_nodes_all_reduce_across_them_in_every_generation(tmp_path):
    port = free_port()
    nodes = [_start(tmp_path, rank, port, ALLREDUCE, "--nproc", "2") for rank in (0, 1)]
    codes = [node.wait(200) for node in nodes]

    assert codes == [0, 0], summaries(nodes)
    results = {path.name: json.loads(path.read_text()) for path in (tmp_path / "work" / "results").glob("*.json")}
    assert sorted(results) == [f"gen{g}-rank{r}.json" for g in (1, 2) for r in range(4)]
    # Each rank adds rank+1: a sum of 1+2+3+4 proves all four workers, two per node, were in one process group.
    assert {(r["world"], r["sum"]) for r in results.values()} == {(4, 10.0)}
    assert {r["load"] for name, r in results.items() if name.startswith("gen2")} == {"PAI"}


@pytest.mark.timeout(240)
def test_a_node_killed_while_its_peers_are_inside_a_collective_does_not_leave_them_hung(tmp_path):
    port = free_port()
    nodes = [_start(tmp_path, rank, port, ALLREDUCE, "--nproc", "1", script_args=("--spin",)) for rank in (0, 1)]
    wait_event(nodes[0], "generation_started", 120)
    wait_event(nodes[1], "generation_started", 120)
    spinning = tmp_path / "work" / "results" / "spinning"  # rank 0 is past its first all_reduce: so is rank 1
    wait_until(spinning.exists, 120, message="the workers inside their all_reduce loop")
    doomed = _tree(nodes[1])
    nodes[1].popen.kill()
    nodes[1].wait(10)
    assert_all_gone(doomed, within=10)

    failed = wait_event(nodes[0], "generation_failed", 90)
    assert failed["generation"] == 1
    survivors = _tree(nodes[0])
    nodes[0].send(signal.SIGTERM)
    assert nodes[0].wait(60) == 143
    assert_all_gone(survivors, within=10)


@pytest.mark.timeout(600)
def test_the_real_example_on_two_hosts_runs_to_completion(tmp_path, two_hosts):
    port = free_port()
    nodes = [_start(tmp_path, rank, port, EXAMPLE, "--nproc", "1", host=two_hosts[rank], endpoint=two_hosts[0].address)
             for rank in (0, 1)]
    codes = [node.wait(560) for node in nodes]

    assert codes == [0, 0], summaries(nodes)
    save = tmp_path / "work" / "PAI"
    assert (save / ".training_complete").is_file()
    assert len(list(save.glob("switch_*.pt"))) >= 2
    generations = nodes[0].events("generation_ended")
    assert len(generations) >= 3
    assert [e["generation"] for e in nodes[1].events("generation_ended")] == [e["generation"] for e in generations]
    for node, host in zip(nodes, two_hosts):
        assert node.event("job_nodes")["serving_store"] is (host is two_hosts[0])
    # Every generation trained on both hosts: one worker per node, ranks 0 and 1.
    progress = [json.loads(line.split("PAI_EXAMPLE ", 1)[1]) for node in nodes for line in node.stdout.splitlines()
                if "PAI_EXAMPLE " in line]
    exits = {(p["gen"], p["rank"]) for p in progress if p["event"] in ("restructure_exit", "complete_exit")}
    assert exits >= {(str(g), r) for g in range(1, len(generations) + 1) for r in (0, 1)}
    assert read_state(save)["last_exit"]["code"] == 0


@pytest.mark.timeout(400)
def test_the_real_example_restructures_in_process_across_two_nodes(tmp_path):
    """Two nodes on loopback, one worker each, --restructure in-process: one generation, every restructure re-wrapped
    across both nodes, and both nodes' pai-launch log each one."""
    port = free_port()
    nodes = [_start(tmp_path, rank, port, EXAMPLE, "--nproc", "1", "--restructure", "in-process") for rank in (0, 1)]
    codes = [node.wait(360) for node in nodes]

    assert codes == [0, 0], summaries(nodes)
    save = tmp_path / "work" / "PAI"
    assert (save / ".training_complete").is_file()
    switches = sorted(path.name for path in save.glob("switch_*.pt"))
    assert len(switches) >= 2
    for node in nodes:
        assert [e["generation"] for e in node.events("generation_ended")] == [1]
        logged = node.events("restructured_in_process")
        assert sorted(e["file"] for e in logged) == switches and all(e["ranks"] == 2 for e in logged), logged
    progress = [json.loads(line.split("PAI_EXAMPLE ", 1)[1]) for node in nodes for line in node.stdout.splitlines()
                if "PAI_EXAMPLE " in line and '"gen": "0"' not in line]
    # Both ranks went on in their first process through every restructure.
    assert {p["rank"] for p in progress if p["event"] == "restructured"} == {0, 1}
    assert len({(p["rank"], p["pid"]) for p in progress}) == 2
