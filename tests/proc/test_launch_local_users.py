"""No other local user can block or redirect a run: the real pai-launch (as root, the way the systemd unit runs it)
against a real second user, pai-intruder, made once per session and acted as with setpriv.

- its socket on the save folder's path lock name: the run starts anyway, says so, and the flock still keeps a
  second pai-launch out;
- the lock file and SAVE/.pai-launch: that user can neither open the one nor write into the other;
- what that user planted (a symbolic link at the lock file or at SAVE/.pai-launch, a SAVE/.pai-launch of their own):
  one line, exit 2, nothing started, the link's target untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pai_launch.savefmt.folderlock import flock_holders
from pai_launch.savefmt.pathlock import PathLock
from pai_launch.status import gather as run_status
from tests.helpers import (
    LOCAL_USER,
    as_user,
    end_squat,
    local_user,
    local_user_unavailable,
    squat_socket,
    tree_state,
    wait_until,
)
from tests.proc.launch_files import make_resumable, state_dir

pytestmark = pytest.mark.timeout(90)

HOLD = ["--generations", "1", "--heartbeat", "0.1"]


@pytest.fixture(scope="session")
def intruder() -> tuple[int, int]:
    """(uid, gid) of a real unprivileged local user, made with useradd when absent."""
    why = local_user_unavailable()
    if why and os.geteuid() != 0:
        pytest.skip(why)
    assert why is None, why
    return local_user()


@pytest.fixture
def shared_scene(make_scene):
    """A scene under /tmp that every user may enter (pytest's own temporary folder is root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="pai-launch-users-", dir="/tmp"))
    root.chmod(0o755)
    yield make_scene(root)
    shutil.rmtree(root, ignore_errors=True)


def run_as(ids: tuple[int, int], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([*as_user(ids), *argv], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


@pytest.fixture
def squatter(intruder):
    """squat(address, listen) -> the pid of the intruder's socket bound to that abstract name; ended at the end."""
    started: list[subprocess.Popen] = []

    def squat(address: str, listen: bool) -> int:
        started.append(squat_socket(intruder, address, listen=listen))
        return started[-1].pid

    yield squat
    for proc in started:
        end_squat(proc)


@pytest.mark.parametrize("listen", [True, False], ids=["listening", "bound-only"])
def test_another_users_socket_on_the_lock_name_neither_blocks_the_run_nor_lets_a_second_one_in(
        shared_scene, intruder, squatter, listen):
    scene = shared_scene
    save = scene.work / "PAI"
    squat_pid = squatter(PathLock(save).address, listen)

    first = scene.start("--nproc", "2", script_args=[*HOLD, "--hold-until", str(scene.hold_file)])
    scene.wait_ready(1, 2)
    squatted = first.event("save_lock_squatted")
    if listen:
        assert (squatted["holder_pid"], squatted["holder_uid"]) == (squat_pid, intruder[0]), squatted
        assert LOCAL_USER in squatted["holder_user"]
    else:
        assert squatted["holder"] == "a socket that does not listen", squatted
    # pai-launch status names the run's supervisor, not the squatter.
    assert run_status.gather(save).supervisor.pid == first.pid

    second, rc = scene.run("--nproc", "2", script_args=[*HOLD, "--hold-until", str(scene.hold_file)], timeout=30)
    assert rc == 2, second.stderr
    assert f"another pai-launch (PID {first.pid})" in second.error_line()

    scene.hold_file.touch()
    assert first.wait(60) == 0, first.log_summary()


def test_another_user_can_neither_open_the_lock_file_nor_write_into_the_state_folder(shared_scene, intruder):
    scene = shared_scene
    launch = scene.start("--nproc", "2", script_args=[*HOLD, "--hold-until", str(scene.hold_file)])
    scene.wait_ready(1, 2)
    lock = state_dir(scene.work / "PAI") / "lock.node0"
    st = lock.stat()
    assert (oct(st.st_mode & 0o777), st.st_uid) == ("0o600", 0)

    opened = run_as(intruder, "flock", "--nonblock", str(lock), "true")
    assert opened.returncode != 0 and "Permission denied" in opened.stderr, opened
    planted = run_as(intruder, "ln", "-s", "/etc/passwd", str(lock.parent / "events.node1.jsonl"))
    assert planted.returncode != 0 and "Permission denied" in planted.stderr, planted

    scene.hold_file.touch()
    assert launch.wait(60) == 0, launch.log_summary()


def _root_only_file(scene) -> Path:
    target = scene.root / "root-only" / "secret"
    target.parent.mkdir(mode=0o700)
    target.write_text("root's own file\n")
    target.chmod(0o600)
    return target


@pytest.mark.parametrize("resumable", [True, False], ids=["resume", "init-run-first"])
def test_a_link_another_user_planted_at_the_lock_file_is_refused_and_its_target_untouched(
        shared_scene, intruder, resumable):
    scene = shared_scene
    save = scene.work / "PAI"
    if resumable:
        make_resumable(save)
    state_dir(save).mkdir(parents=True)
    state_dir(save).chmod(0o777)  # as a pai-launch of old made it under umask 0
    target = _root_only_file(scene)
    planted = run_as(intruder, "ln", "-s", str(target), str(state_dir(save) / "lock.node0"))
    assert planted.returncode == 0, planted
    before = tree_state(scene.root / "root-only")

    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"], timeout=30)

    assert rc == 2, launch.stderr
    assert "lock.node0 is a symbolic link" in launch.error_line()
    assert tree_state(scene.root / "root-only") == before
    assert os.listdir(state_dir(save)) == ["lock.node0"], "nothing else was made"
    assert scene.records() == [], "nothing was started"


def test_a_state_folder_another_user_made_is_refused_in_one_line(shared_scene, intruder):
    scene = shared_scene
    save = make_resumable(scene.work / "PAI")
    save.chmod(0o777)  # a shared folder: anyone may make entries in it
    target = _root_only_file(scene)
    for argv in (["mkdir", str(state_dir(save))], ["ln", "-s", str(target), str(state_dir(save) / "events.jsonl")],
                 ["ln", "-s", str(target), str(state_dir(save) / "state.json.tmp")]):
        assert run_as(intruder, *argv).returncode == 0, argv
    before, secret = tree_state(save), tree_state(target.parent)

    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"], timeout=30)

    assert rc == 2, launch.stderr
    line = launch.error_line()
    assert ".pai-launch belongs to" in line and LOCAL_USER in line and f"uid {intruder[0]}" in line, line
    assert tree_state(save) == before and tree_state(target.parent) == secret
    assert scene.records() == []


def test_a_state_folder_that_is_a_link_is_refused_and_nothing_lands_where_it_points(shared_scene, intruder):
    scene = shared_scene
    save = scene.work / "PAI"
    save.mkdir()
    save.chmod(0o777)
    hidden = scene.root / "root-only"
    hidden.mkdir(mode=0o700)
    assert run_as(intruder, "ln", "-s", str(hidden), str(state_dir(save))).returncode == 0

    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"], timeout=30)

    assert rc == 2, launch.stderr
    assert ".pai-launch is a symbolic link" in launch.error_line()
    assert os.listdir(hidden) == [] and os.listdir(save) == [".pai-launch"]
    assert scene.records() == []


def test_a_lock_file_of_another_user_is_refused_in_one_line(shared_scene, intruder):
    scene = shared_scene
    save = make_resumable(scene.work / "PAI")
    state_dir(save).mkdir()
    state_dir(save).chmod(0o777)
    lock = state_dir(save) / "lock.node0"
    assert run_as(intruder, "touch", str(lock)).returncode == 0

    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"], timeout=30)

    assert rc == 2, launch.stderr
    line = launch.error_line()
    assert "lock.node0 belongs to" in line and LOCAL_USER in line, line
    assert lock.stat().st_size == 0 and lock.stat().st_uid == intruder[0]
    assert scene.records() == []


def test_an_old_world_readable_lock_file_flocked_by_another_user_names_the_real_holder_not_the_dead_pid(
        shared_scene, intruder):
    scene = shared_scene
    save = make_resumable(scene.work / "PAI")
    state_dir(save).mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock = state_dir(save) / "lock.node0"
    lock.write_text(f"{dead.pid}\n")
    lock.chmod(0o644)  # as a pai-launch of old left it: anyone could open it
    holder = subprocess.Popen([*as_user(intruder), "flock", "--nonblock", str(lock), "cat"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL)
    try:
        st = lock.stat()
        wait_until(lambda: holder.pid in flock_holders(Path("/proc/locks").read_text(), st.st_dev, st.st_ino)
                   or holder.poll() is not None, 30)
        assert holder.poll() is None, "the other user could not flock the old lock file"

        launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"], timeout=30)

        assert rc == 2, launch.stderr
        line = launch.error_line()
        assert f"another process (PID {holder.pid}) holds the lock file" in line, line
        assert f"another pai-launch (PID {dead.pid})" not in line
        assert scene.records() == []
    finally:
        holder.stdin.close()
        holder.wait(10)
