"""Multi-node faults on one machine: a node killed mid-generation (and its pai-launch restarted), node 0 killed (the
job's store with it), a stop signal to any node, a node lost with --nnodes MIN:MAX. Nothing of a stopped or killed
node may be left behind."""

from __future__ import annotations

import signal

import psutil
import pytest

from pai_launch.agent.generation import BLIND_WATCH_TEST_ENV, LAUNCHER_LATE_TEST_ENV
from pai_launch.agent.main import DIES_SLOWLY_TEST_ENV
from pai_launch.agent.multinode import REPORT_LATE_TEST_ENV
from tests.helpers import assert_all_gone, wait_until
from tests.proc.job import free_port, start_job, start_node, summaries, wait_all
from tests.proc.launch_files import read_state, wait_event

pytestmark = [pytest.mark.timeout(150)]

#: The multi-node tests run with warm workers and with cold ones.
pytestmark.append(pytest.mark.usefixtures("both_modes"))

#: crossnode.LOST_AFTER plus a generous margin on a loaded machine (a collective timeout would be 30 min).
LOSS_NOTICED_WITHIN = 60


def _node_processes(launch) -> list[psutil.Process]:
    try:
        return [psutil.Process(launch.pid), *psutil.Process(launch.pid).children(recursive=True)]
    except psutil.Error:
        return []


@pytest.mark.parametrize("killed", [1])
def test_a_node_killed_mid_generation_stops_the_others_workers_and_its_restart_rejoins_the_job(scene, killed):
    hold = ["--hold-until", str(scene.hold_file), "--generations", "3"]
    nodes, port = start_job(scene, 2, "--nproc", "1", "--backoff", "0.2", script_args=hold)
    scene.wait_ready(1, 2)
    doomed = _node_processes(nodes[killed])
    nodes[killed].popen.kill()
    nodes[killed].wait(10)
    survivor = nodes[1 - killed]

    assert_all_gone(doomed, within=10)  # its agent, workers (and node 0's store) die with it
    failed = wait_event(survivor, "generation_failed", LOSS_NOTICED_WITHIN)
    assert failed["generation"] == 1
    # Named when node 1 had said who it was, else counted: either way the loss is the cause, not node 0's workers.
    assert ("node 1" in failed["error"]
            and "stopped responding" in failed["error"]) or "never reported in" in failed["error"]
    wait_until(lambda: scene.signals(), 10, message="the surviving node's worker to be stopped")
    wait_event(survivor, "generation_started", 30, count=2)  # the retry waits for the killed node (or its store)

    again = start_node(scene, killed, port, "--nproc", "1", "--backoff", "0.2", name=f"node{killed}-again",
                       script_args=hold)
    wait_event(again, "generation_started", 60)
    wait_until(lambda: len([r for r in scene.records() if r["env"]["PAI_LAUNCH_GENERATION"] == "2"]) >= 2, 60,
               message="both nodes' workers of generation 2")
    scene.hold_file.touch()
    assert survivor.wait(90) == 0 and again.wait(90) == 0, summaries([survivor, again])

    assert again.event("run_started")["resumed"] is True, "the restarted node took node 0's record"
    assert [e["generation"] for e in again.events("generation_ended")] == [2, 3]
    assert [e["generation"] for e in survivor.events("generation_ended")] == [2, 3]
    assert read_state(scene.work / "PAI")["failures"] == 0


def test_the_workers_a_killed_nodes_agent_ends_on_its_way_out_are_not_taken_for_the_generations_failure(scene):
    """Node 1's pai-launch is killed; its agent kills its workers as it leaves, and lingers (a fault hook: its other
    threads get time to run, as on a loaded machine). Those SIGKILLs are the agent's own doing: node 0 must name node
    1 as lost, never one of its ranks as killed by SIGKILL, which the agent's watch of its workers would publish."""
    hold = ["--hold-until", str(scene.hold_file), "--generations", "3"]
    port = free_port()
    nodes = [start_node(scene, 0, port, "--nproc", "1", "--backoff", "0.2", script_args=hold),
             start_node(scene, 1, port, "--nproc", "1", "--backoff", "0.2", script_args=hold,
                        env={DIES_SLOWLY_TEST_ENV: "3"})]
    scene.wait_ready(1, 2)
    doomed = _node_processes(nodes[1])
    nodes[1].popen.kill()
    nodes[1].wait(10)

    failed = wait_event(nodes[0], "generation_failed", LOSS_NOTICED_WITHIN)
    assert failed["generation"] == 1, summaries(nodes)
    assert "node 1" in failed.get("error", "") and "stopped responding" in failed["error"], summaries(nodes)
    assert "SIGKILL" not in str(failed), summaries(nodes)
    assert_all_gone(doomed, within=15)  # its agent too, once it has lingered
    nodes[0].send(signal.SIGTERM)
    assert nodes[0].wait(30) == 143, nodes[0].log_summary()


def test_node_0_killed_mid_generation_ends_node_1_within_seconds_with_exit_1_naming_the_lost_store(scene):
    hold = ["--hold-until", str(scene.hold_file), "--generations", "3"]
    nodes, port = start_job(scene, 2, "--nproc", "1", "--backoff", "0.2", script_args=hold)
    scene.wait_ready(1, 2)
    everything = [proc for node in nodes for proc in _node_processes(node)]
    nodes[0].popen.kill()
    nodes[0].wait(10)

    # Not after --rdzv-timeout (900 s) twice: node 1's watch of the store sees it go.
    assert nodes[1].wait(LOSS_NOTICED_WITHIN) == 1, nodes[1].log_summary()
    finished = nodes[1].event("run_finished")
    assert f"the job's store at 127.0.0.1:{port} went away" in finished["reason"], finished
    assert nodes[1].event("job_store_lost")["reason"] == finished["reason"]
    assert_all_gone(everything, within=10)


@pytest.mark.parametrize("signalled", [0, 1])
def test_sigterm_to_any_nodes_pai_launch_stops_the_whole_job_cleanly_with_143(scene, signalled):
    # A worker slow to exit, as one that saves on SIGTERM is (rank 3, node 1's second), beside one that exits at
    # once: each gets one SIGTERM, from pai-launch (the signalled node's) or its agent (the other's), none from torch's
    # teardown once its sibling has gone.
    script = ["--hold-until", str(scene.hold_file), "--exit-delay", "2", "--exit-delay-rank", "3"]
    nodes, _ = start_job(scene, 2, "--nproc", "2", script_args=script)
    scene.wait_ready(1, 4)
    everything = [proc for node in nodes for proc in _node_processes(node)]
    nodes[signalled].send(signal.SIGTERM)
    codes = wait_all(nodes, 60)

    assert codes == [143, 143], summaries(nodes)
    assert_all_gone(everything, within=5)
    seen = scene.signals()
    assert sorted(seen) == [0, 1, 2, 3] and all(s == ["SIGTERM"] for s in seen.values()), (seen, summaries(nodes))
    other = nodes[1 - signalled]
    assert f"SIGTERM to node {signalled}'s pai-launch" in other.event("run_finished")["reason"]
    assert nodes[signalled].event("job_stop_announced")["told"] is True
    assert read_state(scene.work / "PAI")["last_exit"]["code"] == 143
    # A stop asked for, on every node: the generation is stopped, not failed, and says what stopped it.
    for node, cause in ((nodes[signalled], "SIGTERM"), (other, f"SIGTERM to node {signalled}'s pai-launch")):
        assert "generation_failed" not in node.event_names(), summaries(nodes)
        stopped = node.event("generation_stopped")
        assert (stopped["level"], stopped["generation"]) == ("info", 1) and cause in stopped["cause"], stopped
        assert node.event("run_finished")["level"] == "info"


def test_sigterm_to_node_0_during_its_init_run_stops_the_waiting_nodes_too(scene):
    nodes, _ = start_job(scene, 2, "--nproc", "1", script_args=["--hang-init"])
    wait_until(lambda: list(scene.ready_dir.glob("0-*")), 30, message="the init run to start")
    wait_event(nodes[1], "generation_started", 30)  # node 1 waits for node 0 to open generation 1
    nodes[0].send(signal.SIGTERM)
    codes = wait_all(nodes, 60)

    assert codes == [143, 143], summaries(nodes)
    assert "SIGTERM to node 0's pai-launch" in nodes[1].event("run_finished")["reason"]
    assert [r for r in scene.records() if not r["init"]] == [], "no worker ever started"


def test_with_nnodes_min_max_the_job_goes_on_with_fewer_nodes_when_one_is_lost(scene):
    hold = ["--hold-until", str(scene.hold_file), "--generations", "2"]
    nodes, _ = start_job(scene, 2, "--nproc", "1", "--backoff", "0.2", nnodes="1:2", script_args=hold)
    scene.wait_ready(1, 2)
    nodes[1].popen.kill()
    nodes[1].wait(10)
    wait_event(nodes[0], "generation_failed", LOSS_NOTICED_WITHIN)
    scene.hold_file.touch()

    assert nodes[0].wait(90) == 0, nodes[0].log_summary()
    retry = [r for r in scene.records() if not r["init"] and r["env"]["PAI_LAUNCH_GENERATION"] == "2"]
    assert len(retry) == 1 and retry[0]["env"]["WORLD_SIZE"] == "1", "generation 2 ran on the one node left"


#: Timing faults set on purpose on node 1 (fault hooks, not a slow machine): torch reaps each worker before the watch
#: looks (only torch's normal return says they ran), the node publishes its outcome 3 s late, or torch's launcher
#: returns 3 s after its workers ended.
TIMING_FAULTS = {"watch_blind": {BLIND_WATCH_TEST_ENV: "1"}, "reports_late": {REPORT_LATE_TEST_ENV: "3"},
                 "launcher_late": {LAUNCHER_LATE_TEST_ENV: "3"}}


@pytest.mark.parametrize("fault", sorted(TIMING_FAULTS))
def test_every_node_reaches_the_same_verdict_whatever_the_timing_of_one_nodes_end(scene, fault):
    """Node 1 ends its generations with the timing fault: every generation is still judged alike on both nodes, the
    completed last one is logged as ended (never failed, never a node that "never reported in"), no agent is
    replaced, and both nodes exit 0."""
    port = free_port()
    script = ["--generations", "2"]
    nodes = [start_node(scene, 0, port, "--nproc", "1", script_args=script),
             start_node(scene, 1, port, "--nproc", "1", script_args=script, env=TIMING_FAULTS[fault])]
    codes = wait_all(nodes, 90)

    assert codes == [0, 0], summaries(nodes)
    for node in nodes:
        assert node.events("generation_failed") == [], summaries(nodes)
        assert node.events("agent_replaced") == [], summaries(nodes)
        assert [e["generation"] for e in node.events("generation_ended")] == [1, 2]
        assert [e["complete"] for e in node.events("generation_ended")] == [False, True]
        assert node.event("run_finished")["reason"] == "training complete"
        assert "never reported in" not in str(node.events()), summaries(nodes)


def _retry_held(scene) -> list[str]:
    """Rank 1 fails in generation 2; generation 3, its retry, trains until the scene's hold file appears."""
    return ["--generations", "4", "--fail-rank", "1", "--fail-generation", "2", "--hold-until", str(scene.hold_file),
            "--hold-generation", "3"]


def _switch_files(scene) -> set[str]:
    return {p.name for p in (scene.work / "PAI").glob("switch_*.pt")}


def test_node_1_lost_during_the_retry_of_a_failed_generation_costs_no_progress_and_counts_each_failure_once(scene):
    nodes, port = start_job(scene, 2, "--nproc", "1", "--backoff", "0.2", script_args=_retry_held(scene))
    scene.wait_ready(3, 2)  # generation 2 failed on rank 1; both nodes' workers of its retry are running
    before = _switch_files(scene)
    nodes[1].popen.kill()
    nodes[1].wait(10)
    wait_event(nodes[0], "generation_failed", LOSS_NOTICED_WITHIN, count=2)

    again = start_node(scene, 1, port, "--nproc", "1", "--backoff", "0.2", name="node1-again",
                       script_args=_retry_held(scene))
    scene.hold_file.touch()
    codes = [nodes[0].wait(90), again.wait(90)]

    assert codes == [0, 0], summaries([nodes[0], again])
    assert [e["failures"] for e in nodes[0].events("retry_scheduled")] == [1, 2]
    assert [e["generation"] for e in nodes[0].events("generation_failed")] == [2, 3]
    assert again.event("run_started")["resumed"] is True
    assert before and before <= _switch_files(scene), "a switch file written before the loss is gone"
    assert read_state(scene.work / "PAI")["failures"] == 2  # generation 2's rank and generation 3's node, once each


def test_a_second_failure_on_the_other_node_during_the_retry_is_counted_once_and_the_job_completes(scene):
    """Rank 1 (node 1) fails in generation 2; in its retry, generation 3, rank 0 (node 0) fails: each failure is
    counted once, on both nodes alike, nothing written before is lost, and both nodes exit 0 once generation 4
    completes."""
    script = ["--generations", "4", "--fail-plan", "2:1,3:0"]
    nodes, _ = start_job(scene, 2, "--nproc", "1", "--backoff", "0.2", script_args=script)
    codes = wait_all(nodes, 120)

    assert codes == [0, 0], summaries(nodes)
    for node in nodes:
        failed = node.events("generation_failed")
        assert [(e["generation"], e.get("rank")) for e in failed] == [(2, 1), (3, 0)], summaries(nodes)
        assert [e["failures"] for e in node.events("retry_scheduled")] == [1, 2]
        assert node.event("run_finished")["reason"] == "training complete"
    assert read_state(scene.work / "PAI")["failures"] == 2
    assert "switch_2.pt" in _switch_files(scene), "generation 1's switch file is kept through both failures"


def test_node_0_lost_during_the_retry_ends_node_1_and_the_job_restarted_resumes_with_nothing_lost(scene):
    nodes, port = start_job(scene, 2, "--nproc", "1", "--backoff", "0.2", script_args=_retry_held(scene))
    scene.wait_ready(3, 2)
    before = _switch_files(scene)
    nodes[0].popen.kill()
    nodes[0].wait(10)

    assert nodes[1].wait(LOSS_NOTICED_WITHIN) == 1, summaries(nodes)  # no node goes on without node 0's store
    # Generation 2's failure, and the store's loss where node 1 scheduled a retry before it knew: each counted once.
    assert [e["failures"] for e in nodes[1].events("retry_scheduled")] in ([1], [1, 2])
    again = [start_node(scene, rank, port, "--nproc", "1", "--backoff", "0.2", name=f"node{rank}-again",
                        script_args=_retry_held(scene)) for rank in (0, 1)]
    scene.hold_file.touch()
    codes = [node.wait(90) for node in again]

    assert codes == [0, 0], summaries(again)
    for node in again:
        started = node.event("run_started")
        assert started["resumed"] is True and started["generation"] == 3, summaries(again)
        assert node.events("retry_scheduled") == [] and node.events("generation_failed") == []
    assert before and before <= _switch_files(scene), "a switch file written before the loss is gone"
