"""The machine's limits and the script's name: --nproc against the open-files limit and the cores, a script named
like an option, a removed working directory, and a full disk under the workers' output."""

import queue
from pathlib import Path

import pytest

from pai_launch import entry
from pai_launch.cli import launch as cli
from pai_launch.cli import specbuilder, startup
from pai_launch.cli.preflight import preflight
from pai_launch.linux import capacity
from pai_launch.placement.spec import LaunchSpec, PreflightError
from pai_launch.savefmt import savedir
from pai_launch.supervise.folder import logspace
from pai_launch.supervise.job import plan

pytestmark = pytest.mark.timeout(30)


def _spec(tmp_path, **overrides):
    (tmp_path / "train.py").write_text("")
    return LaunchSpec(**{**dict(script=Path("train.py"), workdir=tmp_path, python="/py", dry_run=True), **overrides})


def test_nproc_past_what_the_open_files_limit_holds_is_one_line_naming_the_most_that_fits(tmp_path):
    limit = capacity.fds_needed(10)
    preflight(_spec(tmp_path, nproc=10), chosen_nproc=10, env={}, physical=0, open_files=lambda: limit)
    with pytest.raises(PreflightError) as caught:
        preflight(_spec(tmp_path, nproc=11), chosen_nproc=11, env={}, physical=0, open_files=lambda: limit)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"--nproc 11 needs about {capacity.fds_needed(11)} open files")
    assert f"limit of {limit}" in text and "at most --nproc 10" in text and "ulimit -n" in text


def test_an_unlimited_open_files_limit_holds_any_nproc(tmp_path):
    preflight(_spec(tmp_path, nproc=100000), chosen_nproc=100000, env={}, physical=0, open_files=lambda: None)


def test_a_tiny_limit_says_no_worker_fits():
    assert "at most --nproc 0" in capacity.open_files_problem(1, 10)


def test_the_real_command_line_refuses_100000_workers_under_the_real_limit(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(specbuilder, "physical_gpu_count", lambda: 0)
    monkeypatch.setattr(capacity, "open_files_limit", lambda: 1024)
    calls = []
    monkeypatch.setattr(startup, "launch_run", lambda *args: calls.append(args) or 0)
    assert cli.run_command_line(["--nproc", "100000", "train.py"], queue.SimpleQueue()) == 2
    err = capsys.readouterr().err.strip()
    assert calls == [] and "\n" not in err and err.startswith("pai-launch: error: --nproc 100000 needs about")


def test_more_workers_than_cores_is_a_warning_not_an_error():
    assert capacity.cores_warning(2, 2) is None
    fields = capacity.cores_warning(8, 2)
    assert fields["nproc"] == 8 and fields["cores"] == 2 and "--nproc 2" in fields["hint"]


def test_the_real_readers_answer():
    assert capacity.usable_cores() >= 1
    limit = capacity.open_files_limit()
    assert limit is None or limit > 0


@pytest.mark.parametrize("given, expected", [("-train.py", "./-train.py"), ("-dir/t.py", "./-dir/t.py"),
                                             ("train.py", "train.py"), ("/abs/-t.py", "/abs/-t.py")])
def test_a_script_path_starting_with_a_dash_is_given_to_python_as_a_path(tmp_path, given, expected):
    spec = LaunchSpec(script=Path(given), workdir=tmp_path, python="/py")
    assert plan.init_command(spec, "RID", ()).argv[:3] == ("/py", "-u", expected)
    assert plan.worker_command(spec, None)[:3] == ("/py", "-u", expected)
    assert plan.data_parallel_command(spec, "RID", 1).argv[:3] == ("/py", "-u", expected)


def test_pathlib_drops_the_dot_slash_the_user_gave():  # why script_arg puts it back
    assert str(Path("./-train.py")) == "-train.py"


def test_a_removed_working_directory_is_exit_2_before_anything_else(tmp_path, monkeypatch, capsys):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(SystemExit) as caught:
        entry.main(["train.py"])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("pai-launch: error: the working directory no longer exists")
    monkeypatch.chdir(tmp_path)


def test_a_full_log_disk_is_named_with_its_free_space_and_the_fix(tmp_path):
    given = logspace.full_message(tmp_path, 300 * 1024, given=True)
    assert given.startswith(f"the disk holding --log-dir {tmp_path} is full: 300 KiB free, at least 1024 KiB needed")
    assert "another disk" in given and "\n" not in given
    assert "temporary log folder" in logspace.full_message(tmp_path, 0, given=False)
    assert "TMPDIR" in logspace.full_message(tmp_path, 0, given=False)
    assert logspace.full_message(tmp_path, 1024 * 1024, given=True) is None


def test_free_space_is_read_from_the_nearest_existing_folder(tmp_path):
    assert savedir.free_bytes(tmp_path / "not" / "yet") > 0
    assert logspace.problem(tmp_path / "not" / "yet", given=True) is None  # this disk has room


@pytest.mark.parametrize("name", ["", ".", "..", "a/..", "a/../..", "/", "./"])
def test_a_save_name_that_is_the_working_directory_or_above_it_is_refused(tmp_path, name):
    with pytest.raises(PreflightError) as caught:
        preflight(_spec(tmp_path, save_name=name), chosen_nproc=None, env={}, physical=0)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"--save-name {name!r} is the working directory") and "e.g." in text


def test_a_save_name_with_a_control_character_is_refused(tmp_path):
    with pytest.raises(PreflightError, match="control character"):
        preflight(_spec(tmp_path, save_name="x\ny"), chosen_nproc=None, env={}, physical=0)


@pytest.mark.parametrize("name", ["PAI", "runs/a", "../elsewhere/PAI", "./PAI", "PAI/"])
def test_save_names_of_a_folder_of_their_own_pass(tmp_path, name):
    preflight(_spec(tmp_path, save_name=name), chosen_nproc=None, env={}, physical=0)
