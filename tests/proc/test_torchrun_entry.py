"""pai-launch as `torchrun` (its console script linked under that name) and as `python -m pai_launch.torchrun`: a
torchrun command line, unchanged, planned and run."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.helpers import FAKE_TRAINER, PYTHON
from tests.proc.job import free_port

pytestmark = pytest.mark.timeout(120)

AS_MODULE = ("-m", "pai_launch.torchrun")


def linked_torchrun(scene) -> tuple[str, ...]:
    """The installed pai-launch console script, linked as io/bin/torchrun (run by the tests' python)."""
    link = scene.io / "bin" / "torchrun"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(Path(PYTHON).parent / "pai-launch")
    return (str(link),)


def test_a_sagemaker_style_torchrun_line_is_planned_as_node_1_of_2_at_the_master_address(scene):
    port = free_port()
    launch, rc = scene.run("--nnodes", "2", "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
                           str(port), "--node_rank", "1", entry=linked_torchrun(scene), json_logs=False,
                           instrument=False, env={"PAI_LAUNCH_DRY_RUN": "1"}, timeout=30)
    assert rc == 0, launch.stderr
    out = launch.stdout
    assert f"from torchrun's options: --rdzv-endpoint 127.0.0.1:{port} (--master_addr, --master_port)" in out
    assert f"nodes: node 1 of 2, rendezvous store at 127.0.0.1:{port}" in out and "(node 0 serves the store)" in out
    assert "init run: node 0's" in out
    assert "generation 1 (2 workers, torch elastic agent, c10d rendezvous in node 0's store at " \
        f"127.0.0.1:{port})" in out
    assert f"command: {PYTHON} -u {FAKE_TRAINER}\n" in out
    assert scene.work_listing() == [] and scene.tmp_listing() == []


@pytest.mark.parametrize("entry", ["linked", "module"])
def test_torchrun_standalone_runs_the_trainer_through_a_restart_to_completion(scene, entry):
    launch, rc = scene.run("--standalone", "--nproc_per_node", "2", json_logs=False,
                           entry=linked_torchrun(scene) if entry == "linked" else AS_MODULE,
                           env={"PAI_LAUNCH_LOG_FORMAT": "json"}, script_args=["--generations", "2"])
    assert rc == 0, launch.log_summary()
    assert [(e["generation"], e["nproc"]) for e in launch.events("generation_started")] == [(1, 2), (2, 2)]
    assert "job_nodes" not in launch.event_names()
    workers = [record for record in scene.records() if not record["init"]]
    assert sorted((r["env"]["PAI_LAUNCH_GENERATION"], r["env"]["RANK"]) for r in workers) == [
        ("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")]
    assert (scene.work / "PAI" / ".training_complete").is_file()


def test_as_torchrun_a_script_named_like_a_tool_is_run_and_one_worker_is_the_default(scene):
    (scene.work / "status").write_text(FAKE_TRAINER.read_text())
    env = {"PAI_LAUNCH_DRY_RUN": "1", "CUDA_VISIBLE_DEVICES": "0,1"}  # pai-launch's own default: 2 workers
    launch, rc = scene.run(entry=AS_MODULE, script="status", json_logs=False, env=env, instrument=False, timeout=30)
    assert rc == 0, launch.stderr
    assert "generation 1 (1 workers" in launch.stdout and f"command: {PYTHON} -u status\n" in launch.stdout


def test_torchruns_log_line_prefix_template_starts_every_relayed_line_of_each_rank(scene):
    template = "[${role_name}:${rank}/${local_rank}@${hostname}] "
    launch, rc = scene.run("--nproc_per_node", "2", "--log-line-prefix-template", template, entry=AS_MODULE,
                           json_logs=False, env={"PAI_LAUNCH_LOG_FORMAT": "json"}, script_args=["--generations", "1"])
    assert rc == 0, launch.log_summary()
    host = socket.gethostname()
    lines = launch.stdout.splitlines()
    for rank in (0, 1):
        assert any(line.startswith(f"[default:{rank}/{rank}@{host}] rank {rank} generation 1 ")
                   for line in lines), lines
        assert not any(line.startswith(f"[rank{rank}]: ") for line in lines), lines


def test_an_unknown_macro_in_the_template_is_one_line_and_exit_2_with_nothing_started(scene):
    launch, rc = scene.run("--nproc_per_node", "2", "--log_line_prefix_template", "${rnk}: ", entry=AS_MODULE,
                           json_logs=False, instrument=False, timeout=30)
    assert rc == 2, launch.stderr
    assert launch.stderr.strip().startswith("pai-launch: error: --log-line-prefix-template '${rnk}: ': ${rnk} is not "
                                            "one of its macros") and "\n" not in launch.stderr.strip()
    assert scene.work_listing() == [] and scene.tmp_listing() == []
