"""Pure construction of commands and environments, and the preflight's one-line errors."""

from pathlib import Path

import pytest

from pai_launch.cli.preflight import parse_gpu_list, preflight, visible_gpus
from pai_launch.placement.spec import LaunchSpec, PreflightError
from pai_launch.supervise.job import plan


def spec(tmp_path, **overrides):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    base = dict(script=Path("train.py"), workdir=tmp_path, python="/py")
    return LaunchSpec(**{**base, **overrides})


def test_init_command_runs_one_unbuffered_process_on_the_first_gpu(tmp_path):
    command = plan.init_command(spec(tmp_path, script_args=("--lr", "1")), "RID", ("2", "3"))
    assert command.argv == ("/py", "-u", "train.py", "--perforate_model_parallel", "--lr", "1")
    assert command.env == {"PAI_LAUNCH_RUN_ID": "RID", "PAI_LAUNCH_GENERATION": "0", "CUDA_VISIBLE_DEVICES": "2"}
    assert command.cwd == tmp_path


@pytest.mark.proc  # starts processes
def test_the_plain_processes_see_no_rank_of_a_job_pai_launch_itself_runs_in(tmp_path):
    """pai-launch as a Slurm task (or under torchrun) has SLURM_PROCID, RANK, ... : a script that reads them would
    start a process group in the init run. The real process gets pai-launch's environment less those."""
    import queue
    import sys

    from pai_launch.core.observations import Role
    from pai_launch.supervise.children.plain_process import PlainProcess

    probe = "import os; print(sorted(k for k in os.environ if k in ('RANK', 'SLURM_PROCID', 'SLURM_JOB_ID', 'KEEP')))"
    base = {"RANK": "3", "SLURM_PROCID": "1", "SLURM_JOB_ID": "77", "KEEP": "1", "PATH": "/usr/bin:/bin"}
    for command in (plan.init_command(spec(tmp_path), "RID", ()), plan.data_parallel_command(spec(tmp_path), "RID", 1)):
        assert {"RANK", "SLURM_PROCID", "MASTER_ADDR"} <= set(command.unset)
        exits: queue.Queue = queue.Queue()
        process = PlainProcess(Role.INIT, plan.Command((sys.executable, "-c", probe), command.env, tmp_path,
                                                       command.unset),
                               base, exits.put)
        assert process.pid is None  # made, not yet started
        process.start()
        assert exits.get(timeout=30).log_tail.strip().splitlines()[-1] == "['KEEP', 'SLURM_JOB_ID']"


def test_init_command_on_a_cpu_machine_leaves_cuda_alone(tmp_path):
    assert "CUDA_VISIBLE_DEVICES" not in plan.init_command(spec(tmp_path), "RID", ()).env


def test_the_worker_command_appends_the_load_folder_only_when_resuming(tmp_path):
    s = spec(tmp_path, script_args=("--epochs", "3"))
    assert plan.worker_command(s, None) == (s.python, "-u", "train.py", "--epochs", "3")
    assert plan.worker_command(s, "PAI") == (s.python, "-u", "train.py", "--epochs", "3", "--pai_load_folder", "PAI")


def test_generation_env_sets_omp_threads_unless_the_user_did(tmp_path):
    s = spec(tmp_path, gpus=("0", "1"))
    env = plan.generation_env(s, "RID", 4, {})
    assert env == {"PAI_LAUNCH_RUN_ID": "RID", "PAI_LAUNCH_GENERATION": "4", "OMP_NUM_THREADS": "1",
                   "CUDA_VISIBLE_DEVICES": "0,1"}
    assert "OMP_NUM_THREADS" not in plan.generation_env(s, "RID", 4, {"OMP_NUM_THREADS": "8"})


def test_run_id_comes_from_the_environment_when_given():
    assert plan.new_run_id({"PAI_LAUNCH_RUN_ID": "mine"}) == "mine"
    first, second = plan.new_run_id({}), plan.new_run_id({})
    assert first != second


def test_elastic_run_ids_are_fresh_per_generation():
    assert plan.new_elastic_run_id("RID", 1) != plan.new_elastic_run_id("RID", 1)


def test_dry_run_plan_names_every_phase(tmp_path):
    lines = plan.describe(spec(tmp_path, nproc=2), "RID", (), {}, needs_init=True, resume_folder=None)
    text = "\n".join(lines)
    assert "--perforate_model_parallel" in text and "generation 1 (2 workers" in text \
        and "PAI_LAUNCH_RUN_ID=RID" in text


@pytest.mark.parametrize(
    "env, gpus, physical, expected",
    [
        ({}, None, 0, ()),
        ({}, None, 2, ("0", "1")),
        ({"CUDA_VISIBLE_DEVICES": "3,1"}, None, 4, ("3", "1")),
        ({"CUDA_VISIBLE_DEVICES": ""}, None, 4, ()),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, None, 4, ()),
        ({"CUDA_VISIBLE_DEVICES": "0,-1,2"}, None, 4, ("0",)),
        ({"CUDA_VISIBLE_DEVICES": "0"}, ("1", "2"), 4, ("1", "2")),
    ],
)
def test_visible_gpus(env, gpus, physical, expected):
    assert visible_gpus(env, gpus, physical) == expected


@pytest.mark.parametrize("text", ["", "0,,1", "0,0", "a", "-1"])
def test_bad_gpu_lists_are_rejected(text):
    with pytest.raises(PreflightError):
        parse_gpu_list(text)


def check(s, *, env=None, physical=0):
    """The spec's --nproc as the one asked for."""
    preflight(s, chosen_nproc=s.nproc, env=env or {}, physical=physical)


def test_preflight_accepts_a_good_spec(tmp_path):
    check(spec(tmp_path, nproc=2))


@pytest.mark.parametrize(
    "overrides, physical, message",
    [
        (dict(script=Path("missing.py")), 0, "does not exist"),
        (dict(script=Path(".")), 0, "is not a file"),
        (dict(nproc=0), 0, "less than 1"),
        (dict(nproc=3), 2, "more than the 2 visible GPU"),
        (dict(gpus=("5",)), 2, "this machine has 2"),
        (dict(grace=-1.0), 0, "--grace -1 is not a number of seconds"),
        (dict(script_args=("--pai_load_folder", "X")), 0, "remove --pai_load_folder"),
        (dict(script_args=("--perforate_model_parallel",)), 0, "remove --perforate_model_parallel"),
        (dict(data_parallel=True, nproc=2), 0, "--data-parallel"),
        (dict(log_format="xml"), 0, "--log-format"),
    ],
)
def test_preflight_errors_are_one_line_naming_problem_and_fix(tmp_path, overrides, physical, message):
    with pytest.raises(PreflightError) as caught:
        check(spec(tmp_path, **overrides), physical=physical)
    text = str(caught.value)
    assert message in text and "\n" not in text and ":" in text


def test_preflight_rejects_a_save_name_that_is_a_file(tmp_path):
    (tmp_path / "PAI").write_text("not a folder")
    with pytest.raises(PreflightError, match="not a folder"):
        check(spec(tmp_path))


def test_preflight_checks_writability_with_the_real_access_call(tmp_path, monkeypatch):
    import pai_launch.cli.preflight as config

    monkeypatch.setattr(config.os, "access", lambda path, mode: False)
    with pytest.raises(PreflightError, match="not writable"):
        check(spec(tmp_path, save_name="deep/new/PAI"))


def test_the_option_checks_are_pure_and_run_before_the_machine_is_looked_at(tmp_path):
    """placement.options judges the options among themselves without touching the disk: a spec whose script and folders
    do not exist passes it, and preflight reports an option problem before a missing script."""
    from pai_launch.placement import options

    gone = tmp_path / "nowhere"

    def nowhere(**overrides) -> LaunchSpec:
        return LaunchSpec(script=Path("train.py"), workdir=gone, python="/py", **overrides)

    options.check(nowhere(), chosen_nproc=None)  # no file is looked at
    with pytest.raises(PreflightError, match="--max-failures 0"):
        preflight(nowhere(max_failures=0), chosen_nproc=None, env={}, physical=0)
    with pytest.raises(PreflightError, match="does not exist"):
        preflight(nowhere(), chosen_nproc=None, env={}, physical=0)
