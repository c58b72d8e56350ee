"""The spec builder: what the user typed and where pai-launch runs in, the LaunchSpec out. Pure values, no process."""

import inspect
from pathlib import Path

import pytest

from pai_launch.cli import launch as cli
from pai_launch.cli.specbuilder import CommandLine, Host, build
from pai_launch.placement.spec import SHARED_FS_SETTLE, PreflightError, policy_for

#: The launch command's parameters that are not options.
NOT_OPTIONS = ("ctx", "print_completion", "version")
SLURM_JOB = {"SLURM_JOB_ID": "77", "SLURM_NNODES": "1", "SLURM_NODEID": "0", "SLURM_JOB_NODELIST": "n1"}


def typed(**options) -> CommandLine:
    """The command line with the launch command's own defaults, and `options` as given."""
    declared = {name: parameter.default for name, parameter in inspect.signature(cli.launch).parameters.items()}
    return CommandLine.of({**declared, "script": Path("train.py"), **options})


def host(env=None, physical=0) -> Host:
    return Host(env=dict(env or {}), physical_gpus=physical, workdir=Path("/work/run"), python="/py")


def test_the_command_lines_fields_are_the_launch_commands_options_in_order():
    parameters = [name for name in inspect.signature(cli.launch).parameters if name not in NOT_OPTIONS]
    assert [field for field in CommandLine.__dataclass_fields__] == parameters


def test_nothing_given_resolves_every_default():
    built = build(typed(), host())
    spec = built.spec
    assert (spec.script, spec.workdir, spec.python) == (Path("train.py"), Path("/work/run"), "/py")
    assert spec.script_args == ()
    assert (spec.nproc, spec.save_name, spec.adopt_save_folder) == (1, "PAI", True)
    assert (spec.max_failures, spec.retries_requested, spec.fs_settle) == (3, False, 0.0)
    assert (spec.gpus, spec.log_dir, spec.preload, spec.doctor, spec.slurm_job_id) == (None, None, None, True, None)
    assert (built.visible, built.chosen_nproc, built.from_slurm) == ((), None, None)


def test_a_save_name_is_the_users_folder_and_is_never_adopted_over():
    spec = build(typed(save_name="runs/OUT"), host()).spec
    assert (spec.save_name, spec.adopt_save_folder) == ("runs/OUT", False)
    assert not policy_for(spec, {}).adopt_save_folder


@pytest.mark.parametrize("given, retries", [(None, False), (3, True), (5, True)])
def test_a_max_failures_asks_for_retries_even_at_the_default_budget(given, retries):
    spec = build(typed(max_failures=given, data_parallel=True), host()).spec
    policy = policy_for(spec, {})
    assert (spec.max_failures, spec.retries_requested) == (given or 3, retries)
    assert (policy.retry_data_parallel, policy.retry_repeats) == (retries, retries)


@pytest.mark.parametrize("options, settle", [
    (dict(), 0.0),
    (dict(poll=True), SHARED_FS_SETTLE),
    (dict(nnodes="2", rdzv_endpoint="node0"), SHARED_FS_SETTLE),
    (dict(nnodes="1:4", rdzv_endpoint="node0"), SHARED_FS_SETTLE),
    (dict(poll=True, fs_settle=0.0), 0.0),
    (dict(fs_settle=2.5), 2.5),
])
def test_the_settle_time_is_the_users_else_the_shared_file_systems(options, settle):
    assert build(typed(**options), host()).spec.fs_settle == settle


def test_the_worker_count_defaults_to_the_visible_gpus_and_only_a_given_one_is_chosen():
    built = build(typed(), host({"CUDA_VISIBLE_DEVICES": "0,1,2"}))
    assert (built.spec.nproc, built.chosen_nproc, built.visible) == (3, None, ("0", "1", "2"))
    built = build(typed(nproc=2, gpus="4,5"), host(physical=8))
    assert (built.spec.nproc, built.chosen_nproc, built.spec.gpus, built.visible) == (2, 2, ("4", "5"), ("4", "5"))
    assert build(typed(), host(physical=2)).spec.nproc == 2


def test_slurms_gpus_on_the_node_are_a_chosen_worker_count_and_named_for_the_dry_run():
    env = {**SLURM_JOB, "SLURM_GPUS_ON_NODE": "4", "SLURM_RESTART_COUNT": "2", "SLURM_STEP_ID": "0"}
    built = build(typed(), host(env))
    assert (built.spec.nproc, built.chosen_nproc) == (4, 4)
    assert (built.spec.slurm_job_id, built.spec.slurm_restart_count, built.spec.slurm_step) == ("77", 2, True)
    assert built.from_slurm == ("from Slurm (job 77): --nnodes 1 (SLURM_NNODES); --node-rank 0 (SLURM_NODEID); "
                                "--nproc 4 (SLURM_GPUS_ON_NODE)")


def test_no_slurm_leaves_the_job_alone():
    built = build(typed(use_slurm=False), host({**SLURM_JOB, "SLURM_GPUS_ON_NODE": "4"}))
    assert (built.spec.slurm_job_id, built.spec.slurm_step) == (None, False)
    assert (built.chosen_nproc, built.from_slurm) == (None, None)


def test_the_options_that_are_spelled_differently_in_the_spec():
    spec = build(typed(script_args=["--lr", "1"], preload=" torch, numpy,,", no_doctor=True, log_dir=Path("logs")),
                 host()).spec
    assert (spec.script_args, spec.preload, spec.doctor, spec.log_dir) == (("--lr", "1"), ("torch", "numpy"), False,
                                                                           Path("/work/run/logs"))
    assert build(typed(preload=""), host()).spec.preload == ()


def test_a_value_that_cannot_be_resolved_is_a_preflight_error():
    with pytest.raises(PreflightError, match="names a GPU twice"):
        build(typed(gpus="0,0"), host())
    with pytest.raises(PreflightError, match="--slurm is given"):
        build(typed(use_slurm=True), host())
