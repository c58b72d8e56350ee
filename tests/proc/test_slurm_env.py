"""pai-launch inside a Slurm job's environment, without a cluster: what it takes from SLURM_* (shown by --dry-run),
that explicit options win, and the one-line errors for an environment or option that cannot work."""

from __future__ import annotations

import os
import shutil

import pytest

pytestmark = pytest.mark.timeout(60)

STEP = {"SLURM_JOB_ID": "77", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_NODEID": "1",
        "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_GPUS_ON_NODE": "2"}


def test_dry_run_shows_what_was_taken_from_slurm(scene):
    launch, rc = scene.run("--dry-run", env=STEP)

    assert rc == 0, launch.stderr
    first = launch.stdout.splitlines()[0]
    assert first.startswith("from Slurm (job 77): ")
    for taken in ("--nnodes 2 (SLURM_STEP_NUM_NODES)", "--node-rank 1 (SLURM_NODEID)",
                  "--rdzv-endpoint gpu01:29477 (first host of SLURM_JOB_NODELIST", "--rdzv-id slurm-77 (SLURM_JOB_ID)",
                  "--nproc 2 (SLURM_GPUS_ON_NODE)"):
        assert taken in first, first
    assert "node 1 of 2, rendezvous store at gpu01:29477" in launch.stdout
    assert "init run: node 0's" in launch.stdout
    assert scene.work_listing() == []


def test_explicit_options_win_over_slurm(scene):
    launch, rc = scene.run("--dry-run", "--node-rank", "0", "--rdzv-endpoint", "head:1234", "--nproc", "1", env=STEP)

    assert rc == 0, launch.stderr
    first = launch.stdout.splitlines()[0]
    assert "--node-rank" not in first and "--rdzv-endpoint" not in first and "--nproc" not in first
    assert "node 0 of 2, rendezvous store at head:1234" in launch.stdout


def test_no_slurm_ignores_the_environment(scene):
    launch, rc = scene.run("--dry-run", "--no-slurm", env=STEP)

    assert rc == 0, launch.stderr
    assert "from Slurm" not in launch.stdout and "rendezvous store" not in launch.stdout


SLURM_ERRORS = {
    "bad_nodelist": ({**STEP, "SLURM_JOB_NODELIST": "gpu[01-"}, [], "SLURM_JOB_NODELIST 'gpu[01-' cannot be parsed"),
    "not_under_srun": ({k: v for k, v in STEP.items() if not k.startswith("SLURM_STEP")}, [], "not running under srun"),
    "two_tasks_per_node": ({**STEP, "SLURM_STEP_NUM_TASKS": "4"}, [], "runs 4 tasks on 2 node(s)"),
    "requeue_outside_slurm": ({}, ["--requeue-on", "USR1"], "--requeue-on works inside a Slurm job"),
    "requeue_bad_signal": ({**STEP, "SLURM_NODEID": "0"}, ["--requeue-on", "KILL"], "--requeue-on 'KILL'"),
    "slurm_flag_outside_slurm": ({}, ["--slurm"], "SLURM_JOB_ID is not set"),
}


@pytest.mark.parametrize("case", SLURM_ERRORS, ids=list(SLURM_ERRORS))
def test_a_slurm_environment_or_option_that_cannot_work_is_one_line_exit_2(scene, case):
    env, pai_args, mention = SLURM_ERRORS[case]
    launch, rc = scene.run(*pai_args, env=env, timeout=30)

    assert rc == 2, launch.stderr
    assert mention in launch.error_line()
    assert scene.work_listing() == [] and scene.records() == []


def test_requeue_on_without_scontrol_on_node_0_says_what_to_install(scene, tmp_path):
    bin_dir = tmp_path / "bin-without-scontrol"
    bin_dir.mkdir()
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (shutil.which("scontrol", path=p)))
    launch, rc = scene.run("--requeue-on", "USR1", env={**STEP, "SLURM_NODEID": "0",
                                                        "PATH": f"{bin_dir}{os.pathsep}{path}"})

    assert rc == 2, launch.stderr
    line = launch.error_line()
    assert "scontrol" in line and "slurm-client" in line
    assert scene.work_listing() == []
