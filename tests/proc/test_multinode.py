"""Multi-node on one machine: two (or three) pai-launch processes as nodes over loopback, one shared save folder,
node 0 serving the job's store. Real elastic agents and c10d rendezvous; fake trainers."""

from __future__ import annotations

import pytest

from tests.helpers import FAKE_TRAINER, events_file, json_events, launch_env, stamp, start_pai_launch
from tests.proc.job import free_port, start_job, start_node, summaries, wait_all
from tests.proc.launch_files import read_state, state_dir

pytestmark = [pytest.mark.timeout(120)]

#: The multi-node tests run with warm workers and with cold ones.
pytestmark.append(pytest.mark.usefixtures("both_modes"))


def _workers(scene) -> list[dict]:
    return [r for r in scene.records() if not r["init"]]


def test_two_nodes_run_the_whole_cycle_with_one_init_run_one_record_and_a_lock_each(scene):
    nodes, _ = start_job(scene, 2, "--nproc", "2", script_args=["--generations", "3"])
    codes = wait_all(nodes, 90)

    assert codes == [0, 0], summaries(nodes)
    records = scene.records()
    assert sum(r["init"] for r in records) == 1, "only node 0 runs the init run"
    assert [e["event"] for e in nodes[1].events()].count("init_started") == 0
    workers = _workers(scene)
    # 3 generations x 2 nodes x 2 workers, every one in a world of 4 with a distinct global rank per generation.
    assert len(workers) == 12
    for generation in (1, 2, 3):
        ranks = sorted(int(r["env"]["RANK"]) for r in workers if r["env"]["PAI_LAUNCH_GENERATION"] == str(generation))
        assert ranks == [0, 1, 2, 3], (generation, ranks)
    assert {r["env"]["WORLD_SIZE"] for r in workers} == {"4"}
    assert len({r["env"]["PAI_LAUNCH_RUN_ID"] for r in records}) == 1, "one run id for the whole job"
    for node in nodes:
        assert [e["generation"] for e in node.events("generation_ended")] == [1, 2, 3]
        assert node.event("run_finished")["reason"] == "training complete"
    save = scene.work / "PAI"
    listing = sorted(p.name for p in state_dir(save).iterdir())
    assert listing == ["coordinator", "events.jsonl", "events.node1.jsonl", "lock.node0", "lock.node1", "state.json"]
    state = read_state(save)
    assert (state["generation"], state["last_exit"]["code"]) == (3, 0)
    node1_events = events_file(state_dir(save) / "events.node1.jsonl")
    assert node1_events[-1]["event"] == "run_finished"
    joined = nodes[1].event("job_nodes")
    assert joined["serving_store"] is False and "node 1 of 2" in joined["nodes"]


def test_a_rank_failing_on_one_node_makes_every_node_retry_the_same_generation_together(scene):
    nodes, _ = start_job(scene, 2, "--nproc", "1", "--backoff", "0.2",
                         script_args=["--generations", "4", "--fail-rank", "1", "--fail-generation", "2"])
    codes = wait_all(nodes, 90)

    assert codes == [0, 0], summaries(nodes)
    for node in nodes:
        failed = node.event("generation_failed")
        # Global rank 1 may have landed on either node (c10d ranks by arrival): both name the same rank and node.
        assert (failed["generation"], failed["rank"], failed["exit"]) == (2, 1, "exit code 3")
        assert failed["node"] in (0, 1)
        retry = node.event("retry_scheduled")
        assert retry["failures"] == 1 and f"rank 1 on node {failed['node']}" in retry["reason"]
        assert [e["generation"] for e in node.events("generation_started")] == [1, 2, 3, 4]
    assert nodes[0].event("generation_failed")["node"] == nodes[1].event("generation_failed")["node"]
    rank1 = [r for r in _workers(scene) if r["env"]["RANK"] == "1"]
    assert len(rank1) == 4  # generations 1, 2 (failed), 3 (its retry), 4
    for node in nodes:  # the node whose workers succeeded was not held in torch's launcher after the failure
        assert node.events("agent_replaced") == [], summaries(nodes)


def test_one_failure_budget_for_the_job_every_node_gives_up_together_with_exit_4(scene):
    # Rank 0 trains long enough (3 s, ample on a loaded 2-core machine) for both nodes to see training reached
    # before it fails: a crash at the moment training starts is judged on what each node saw by then.
    nodes, _ = start_job(scene, 2, "--nproc", "1", "--backoff", "0", "--max-failures", "2",
                         script_args=["--generations", "5", "--fail-rank", "0", "--fail-every", "--train-seconds", "3",
                                      "--heartbeat", "0.05"])
    codes = wait_all(nodes, 90)

    assert codes == [4, 4], summaries(nodes)
    for node in nodes:
        assert [e["failures"] for e in node.events("retry_scheduled")] == [1]
        assert "gave up after 2 consecutive failed generation(s)" in node.event("run_finished")["reason"]
    assert read_state(scene.work / "PAI")["failures"] == 2


def test_no_progress_is_decided_only_after_the_shared_folder_had_time_to_show_files(scene):
    nodes, _ = start_job(scene, 2, "--nproc", "1", "--fs-settle", "1.5", script_args=["--no-progress"])
    codes = wait_all(nodes, 90)

    assert codes == [5, 5], summaries(nodes)
    for node in nodes:
        finished = node.event("run_finished")
        assert "made no progress" in finished["reason"] and "watched 1.5 s more" in finished["reason"]
        assert stamp(finished) - stamp(node.event("generation_ended")) >= 1.5 - 0.1


def test_three_nodes_each_run_their_share_of_the_workers(scene):
    nodes, _ = start_job(scene, 3, "--nproc", "1", script_args=["--generations", "2"])
    codes = wait_all(nodes, 100)

    assert codes == [0, 0, 0], summaries(nodes)
    for generation in (1, 2):
        ranks = sorted(int(r["env"]["RANK"]) for r in _workers(scene) if r["env"]["PAI_LAUNCH_GENERATION"]
                       == str(generation))
        assert ranks == [0, 1, 2]


# --- bad input: one line, exit 2, nothing started ------------------------------------------------------
NODE_ERRORS = {
    "node_rank_outside": (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "127.0.0.1:29400"], "--node-rank 2"),
    "malformed_endpoint": (["--nnodes", "2", "--rdzv-endpoint", "host:port:x"], "--rdzv-endpoint"),
    "bad_port": (["--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:99999"], "port must be 1-65535"),
    "no_endpoint": (["--nnodes", "2"], "needs --rdzv-endpoint"),
    "bad_nnodes": (["--nnodes", "3:2", "--rdzv-endpoint", "127.0.0.1:29400"], "--nnodes"),
    "data_parallel": (["--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29400", "--data-parallel"], "--data-parallel"),
    "fresh_off_node_0": (["--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "127.0.0.1:29400", "--fresh"],
                         "--fresh"),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", NODE_ERRORS, ids=list(NODE_ERRORS))
def test_a_bad_multi_node_option_is_one_line_exit_2_and_nothing_started(scene, case):
    pai_args, mention = NODE_ERRORS[case]
    launch, rc = scene.run(*pai_args, timeout=20)

    assert rc == 2, launch.stderr
    lines = [line for line in launch.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pai-launch: error:") and mention in lines[0], lines
    assert scene.work_listing() == [] and scene.records() == []


@pytest.mark.timeout(40)
def test_a_node_that_cannot_reach_node_0_within_the_timeout_says_so_and_starts_nothing(scene):
    launch = start_node(scene, 1, free_port(), "--nproc", "1", "--rdzv-timeout", "3")
    rc = launch.wait(30)

    assert rc == 2
    line = launch.error_line()
    assert "cannot reach the job's store" in line and "within 3 s" in line and "--rdzv-endpoint" in line
    assert scene.work_listing() == [] and scene.records() == []


@pytest.mark.timeout(60)
def test_a_node_started_with_other_script_arguments_is_refused_by_the_fingerprint(scene):
    port = free_port()
    node0 = start_node(scene, 0, port, "--nproc", "1", script_args=["--generations", "2", "--hold-until",
                                                                    str(scene.hold_file)])
    node1 = start_node(scene, 1, port, "--nproc", "1", "--rdzv-timeout", "30", script_args=["--generations", "3"])
    rc = node1.wait(45)

    assert rc == 2
    line = node1.error_line()
    assert "differs from node 0's" in line and "script_args" in line
    assert not (scene.work / "PAI" / ".pai-launch" / "lock.node1").exists(), "the refused node took nothing"
    node0.send(15)
    assert node0.wait(45) == 143


@pytest.mark.timeout(60)
def test_a_node_with_another_restructure_mode_is_refused(scene):
    """One job's workers all exit at a restructure or all train on: a node that differs would hang the others."""
    port = free_port()
    node0 = start_node(scene, 0, port, "--nproc", "1", "--restructure", "in-process",
                       script_args=["--generations", "2", "--hold-until", str(scene.hold_file)])
    node1 = start_node(scene, 1, port, "--nproc", "1", "--rdzv-timeout", "30",
                       script_args=["--generations", "2", "--hold-until", str(scene.hold_file)])
    rc = node1.wait(45)

    assert rc == 2
    line = node1.error_line()
    assert "differs from node 0's (restructure 'restart' here, 'in-process' on node 0)" in line, line
    assert "--restructure" in line
    node0.send(15)
    assert node0.wait(45) == 143


@pytest.mark.timeout(60)
def test_node_0_whose_port_is_taken_says_so_and_starts_nothing(scene):
    import socket

    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        launch = start_node(scene, 0, port, "--nproc", "1")
        rc = launch.wait(45)

    assert rc == 2
    line = launch.error_line()
    assert f"port {port}" in line and "choose a free port" in line
    assert scene.records() == []


@pytest.mark.timeout(60)
def test_a_node_whose_save_folder_is_not_node_0s_is_refused(scene, tmp_path):
    port = free_port()
    node0 = start_node(scene, 0, port, "--nproc", "1", script_args=["--hold-until", str(scene.hold_file)])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    node1 = start_pai_launch(["--log-format", "json", "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint",
                              f"127.0.0.1:{port}", "--fs-settle", "1", "--nproc", "1", str(FAKE_TRAINER),
                              *scene.instrumentation, "--hold-until", str(scene.hold_file)],
                             cwd=elsewhere, io_dir=scene.io, env=launch_env(scene.root), name="node1-elsewhere")
    rc = node1.wait(45)

    assert rc == 2
    line = node1.error_line()
    assert "file system every node shares" in line
    node0.send(15)
    assert node0.wait(45) == 143
    assert json_events(node0.stderr, "run_finished")[0]["exit_code"] == 143
