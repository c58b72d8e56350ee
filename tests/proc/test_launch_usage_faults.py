"""Usage faults end to end with the real pai-launch: a script whose name starts with '-', a working directory
removed before the start, more workers than the open-files limit holds, and a full --log-dir disk."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.helpers import FAKE_TRAINER, PYTHON, launch_env, run_tool

pytestmark = pytest.mark.timeout(90)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


BAD_SECONDS = [("--grace", "nan"), ("--grace", "inf"), ("--backoff", "nan"), ("--backoff-max", "inf"),
               ("--stall-timeout", "nan"), ("--stall-timeout", "0"), ("--rdzv-timeout", "-1"), ("--fs-settle", "nan")]


@pytest.mark.parametrize("option, value", BAD_SECONDS, ids=[f"{o}={v}" for o, v in BAD_SECONDS])
@pytest.mark.parametrize("form", ["argv", "env"])
def test_a_bad_number_of_seconds_is_one_line_exit_2_and_nothing_started(scene, option, value, form):
    if form == "argv":
        launch, rc = scene.run("--nproc", "2", option, value, timeout=30)
    else:
        name = "PAI_LAUNCH_" + option[2:].upper().replace("-", "_")
        launch, rc = scene.run("--nproc", "2", env={name: value}, timeout=30)

    lines = _error_lines(launch.stderr)
    assert rc == 2, launch.stderr
    assert len(lines) == 1 and lines[0].startswith(f"pai-launch: error: {option} {float(value):g} "), lines
    assert f"e.g. {option} " in lines[0]
    assert scene.work_listing() == [] and scene.records() == [] and scene.tmp_listing() == []


def test_a_script_named_like_an_option_runs_as_a_file_and_trains_to_completion(scene):
    shutil.copy(FAKE_TRAINER, scene.work / "-train.py")
    launch, rc = scene.run("--nproc", "2", script="./-train.py", script_args=["--generations", "2"])

    assert rc == 0, launch.log_summary()
    assert (scene.work / "PAI" / ".training_complete").exists()
    records = scene.records()
    assert [r["env"]["PAI_LAUNCH_GENERATION"] for r in records] == ["0", "1", "1", "2", "2"]
    assert launch.events("run_finished")[0]["exit_code"] == 0


@pytest.mark.parametrize("entry", ["module", "console_script"])
def test_a_removed_working_directory_is_one_line_and_exit_2(tmp_path, entry):
    gone = tmp_path / "gone"
    gone.mkdir()
    shutil.copy(FAKE_TRAINER, gone / "train.py")
    command = [PYTHON, "-m", "pai_launch"] if entry == "module" else [os.path.join(os.path.dirname(PYTHON),
                                                                                   "pai-launch")]
    env = launch_env(tmp_path)
    # The shell enters the folder, removes it, then becomes pai-launch there.
    script = 'cd "$1" && rmdir "$1" 2>/dev/null; rm -rf "$1"; shift; exec "$@"'
    done = subprocess.run(["sh", "-c", script, "sh", str(gone), *command, "--nproc", "2", "train.py"], env=env,
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)

    lines = _error_lines(done.stderr)
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("pai-launch: error: the working directory no longer exists"), lines
    assert done.stdout == "" and os.listdir(tmp_path / "tmp") == []  # no temporary log folder: nothing started


def test_more_workers_than_the_open_files_limit_holds_is_refused_before_anything_starts(scene):
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    launch, rc = scene.run("--nproc", "40", prefix=("prlimit", "--nofile=256:256", "--"), timeout=30)

    lines = _error_lines(launch.stderr)
    assert rc == 2, launch.stderr
    assert len(lines) == 1 and lines[0].startswith("pai-launch: error: --nproc 40 needs about"), lines
    assert "limit of 256" in lines[0] and "at most --nproc 24" in lines[0], lines[0]
    assert scene.work_listing() == [] and scene.records() == [] and scene.tmp_listing() == []


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs, unmounted at the end (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "logs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder) -> None:
    """Write into `folder` until its disk has no room left."""
    with open(folder / "filler", "ab", buffering=0) as handle:
        chunk = b"\0" * 65536
        while True:
            try:
                handle.write(chunk)
            except OSError:
                if len(chunk) == 1:
                    return
                chunk = chunk[: len(chunk) // 2]


def _assert_names_the_full_log_disk(launch, rc, mount):
    assert rc == 6, launch.log_summary()
    full = launch.events("log_dir_full")
    assert full and f"--log-dir {mount} is full" in full[0]["reason"], launch.log_summary()
    finished = launch.events("run_finished")[0]
    assert finished["exit_code"] == 6 and f"--log-dir {mount} is full" in finished["reason"]
    assert "KiB free" in finished["reason"] and "another disk" in finished["reason"]


def test_a_full_log_dir_disk_before_a_generation_ends_the_run_naming_it(scene, small_disk):
    _fill(small_disk)
    launch, rc = scene.run("--nproc", "2", "--log-dir", str(small_disk), script_args=["--generations", "1"])

    _assert_names_the_full_log_disk(launch, rc, small_disk)
    # The init run (its output goes through a pipe) ran; no generation was started into the full disk.
    assert [r["env"]["PAI_LAUNCH_GENERATION"] for r in scene.records()] == ["0"]
    assert launch.events("generation_started") == []


def test_a_log_dir_disk_filling_during_a_generation_names_it_in_the_failure(scene, small_disk):
    launch = scene.start("--nproc", "2", "--log-dir", str(small_disk),
                         script_args=["--generations", "1", "--hold-until", str(scene.hold_file), "--fail-rank", "0"])
    scene.wait_ready(1, 2)
    _fill(small_disk)
    scene.hold_file.touch()
    rc = launch.wait(60)

    _assert_names_the_full_log_disk(launch, rc, small_disk)
    assert len(launch.events("generation_started")) == 1  # not retried into the full disk


def test_more_workers_than_cpu_cores_is_a_warning_and_the_run_goes_on(scene):
    cores = len(os.sched_getaffinity(0))
    launch, rc = scene.run("--dry-run", "--nproc", str(cores + 1), timeout=30)

    assert rc == 0, launch.stderr
    warning = launch.event("nproc_above_cores")
    assert warning["level"] == "warning" and (warning["nproc"], warning["cores"]) == (cores + 1, cores)
    assert f"generation 1 ({cores + 1} workers" in launch.stdout


@pytest.mark.parametrize("name", [".", ""])
def test_the_working_directory_as_the_save_folder_is_refused_and_fresh_moves_nothing(scene, name):
    (scene.work / "notes.txt").write_text("the user's notes\n")
    launch, rc = scene.run("--nproc", "2", "--fresh", "--save-name", name, timeout=30)

    lines = _error_lines(launch.stderr)
    assert rc == 2, launch.stderr
    assert len(lines) == 1 and lines[0].startswith(f"pai-launch: error: --save-name {name!r} is the working"), lines
    assert scene.work_listing() == ["notes.txt"] and scene.records() == [] and scene.tmp_listing() == []


@pytest.mark.parametrize("where", ["--save-name", "--log-dir", "script", "status", "doctor"])
def test_a_path_with_a_name_over_255_bytes_is_one_line_exit_2_and_nothing_started(scene, where):
    long = "n" * 300
    if where in ("status", "doctor"):
        shown = run_tool(where, f"{long}.py" if where == "doctor" else long, cwd=scene.work)
        rc, err = shown.returncode, shown.stderr
    else:
        args = [where, long] if where != "script" else []
        launch, rc = scene.run(*args, script=f"{long}.py" if where == "script" else FAKE_TRAINER, instrument=False)
        err = launch.stderr
    assert rc == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("pai-launch: error: ") and ("is 300 bytes" in line or "is 303 bytes" in line), line
    assert "more than a file name may be (255): give a shorter name" in line and "Traceback" not in err
    assert scene.work_listing() == []


@pytest.mark.parametrize("args, words", [(["--local-ranks-filter", "7"], "--local-ranks-filter '7' names local rank 7"),
                                         (["-r", "0:1,0:2", "--log-dir", "logs"], "names local rank 0 twice")],
                         ids=["filter-beyond-nproc", "redirect-twice"])
def test_console_rank_options_naming_a_missing_or_repeated_rank_are_refused(scene, args, words):
    launch, rc = scene.run("--nproc", "2", *args, timeout=30)
    lines = _error_lines(launch.stderr)
    assert rc == 2 and len(lines) == 1 and words in lines[0], launch.stderr
    assert scene.work_listing() == [] and scene.records() == []


def test_a_save_folder_on_a_full_disk_before_the_start_is_exit_6_naming_the_disk_not_a_failed_init_run(scene):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = scene.work / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        _fill(disk)
        launch, rc = scene.run("--nproc", "1", "--save-name", "disk/PAI", script_args=["--save", "disk/PAI"])
        assert rc == 6, launch.log_summary()
        finished = launch.event("run_finished")
        assert "the disk holding" in finished["reason"] and "disk/PAI is full" in finished["reason"], finished
        assert "another disk" in finished["reason"] and "init run failed" not in finished["reason"]
        assert "init_started" not in launch.event_names() and scene.records() == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
