"""Private folders: a sweep removes only folders whose owner's lock it can take, never a live run's.

The owners are real processes (a lock held in this process would prove nothing about another one); each reports
its folder on stdout and keeps the lock until its stdin closes.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pai_launch.linux import privatedir
from pai_launch.supervise.children.proctable import ProcessTable
from pai_launch.wire import failure_causes
from tests.helpers import REPO, pid_is_live, wait_until

PREFIX = privatedir.PREFIX

#: Makes a private folder in BASE, prints its path, keeps its lock until stdin closes. With "fork-child": a child
#: forked without exec first exits (it closes its inherited copy of the lock); with "exec-child": a long-lived
#: exec'd child (every fd passed on that may be) outlives the owner.
OWNER = textwrap.dedent("""
    import os, subprocess, sys
    from pai_launch.linux import privatedir
    folder = privatedir.create(privatedir.PREFIX + f"{os.getpid()}-", sys.argv[1])
    if sys.argv[2] == "fork-child":
        child = os.fork()
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
    if sys.argv[2] == "exec-child":
        sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                                   close_fds=False)
        print(sleeper.pid, flush=True)
    print(folder.path, flush=True)
    sys.stdin.read()
""")


def start_owner(base: Path, mode: str = "plain") -> tuple[subprocess.Popen, list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "supervisor"), str(REPO)])}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(base), mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    lines = [owner.stdout.readline().strip() for _ in range(2 if mode == "exec-child" else 1)]
    assert all(lines), lines
    return owner, lines


def end_owner(owner: subprocess.Popen) -> None:
    owner.stdin.close()
    owner.wait(30)
    owner.stdout.close()


@pytest.mark.proc  # starts processes
def test_a_folder_whose_owner_lives_is_kept_and_removed_once_the_owner_is_gone(tmp_path):
    owner, (path,) = start_owner(tmp_path)
    folder = Path(path)
    (folder / "pymp-abc").mkdir()

    assert privatedir.remove_abandoned([str(tmp_path)]) == []
    assert (folder / "pymp-abc").is_dir()
    end_owner(owner)
    assert privatedir.remove_abandoned([str(tmp_path)]) == [folder]
    assert not folder.exists()


@pytest.mark.proc  # starts processes
def test_a_sweep_in_another_pid_namespace_keeps_a_live_runs_folder(tmp_path):
    owner, (path,) = start_owner(tmp_path)
    sweep = ("from pai_launch.linux import privatedir; import sys; "
             "print(len(privatedir.remove_abandoned([sys.argv[1]])))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "supervisor"), str(REPO)])}
    try:
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", sweep,
                               str(tmp_path)], capture_output=True, text=True, env=env, timeout=60)
    finally:
        end_owner(owner)
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"unshare --pid is not allowed here: {done.stderr.strip()}")
    assert done.stdout.strip() == "0", done.stderr
    assert Path(path).is_dir()


def test_a_folder_without_a_lock_file_is_never_removed(tmp_path):
    old = tmp_path / f"{PREFIX}1-olderversion"  # an older pai-launch's, whose pid means nothing here
    old.mkdir()
    os.utime(old, (0, 0))
    assert privatedir.remove_abandoned([str(tmp_path)]) == []
    assert old.is_dir()


def test_only_our_prefix_is_swept_and_links_are_left_alone(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / privatedir.LOCK_NAME).touch()
    (tmp_path / f"{PREFIX}2-link").symlink_to(target)
    other = tmp_path / "someone-else"
    other.mkdir()
    (other / privatedir.LOCK_NAME).touch()
    assert privatedir.remove_abandoned([str(tmp_path)]) == []
    assert target.is_dir() and other.is_dir()


def test_the_lock_file_shows_only_once_it_is_locked(tmp_path):
    folder = privatedir.create(f"{PREFIX}{os.getpid()}-", str(tmp_path))
    try:
        assert sorted(os.listdir(folder.path)) == [privatedir.LOCK_NAME]
        assert privatedir.take_abandoned(folder.path) is None  # another open file description: refused
    finally:
        folder.remove()
    assert not folder.path.exists() and folder.lock_fd == -1


@pytest.mark.proc  # starts processes
def test_a_forked_child_that_exits_does_not_release_the_owners_lock(tmp_path):
    owner, (path,) = start_owner(tmp_path, "fork-child")
    try:
        assert privatedir.remove_abandoned([str(tmp_path)]) == []
        assert Path(path).is_dir()
    finally:
        end_owner(owner)


@pytest.mark.proc  # starts processes
def test_an_execd_child_does_not_hold_the_lock_after_its_owner_died(tmp_path):
    owner, (sleeper, path) = start_owner(tmp_path, "exec-child")
    owner.kill()  # kill -9: no cleanup; the sleeper lives on
    owner.wait(30)
    try:
        assert pid_is_live(int(sleeper))
        assert privatedir.remove_abandoned([str(tmp_path)]) == [Path(path)]
    finally:
        os.kill(int(sleeper), 9)
        wait_until(lambda: not pid_is_live(int(sleeper)), 10)
        owner.stdin.close()
        owner.stdout.close()


def test_the_process_tables_folders_are_locked_for_its_life_and_removed_on_close(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    table = ProcessTable(python=sys.executable, workdir=tmp_path, env={}, report=lambda event: None, log_dir=None)
    table.open()
    root = table.log_root
    assert root is not None and root.parent == tmp_path and (root / privatedir.LOCK_NAME).exists()
    fd = os.open(root / privatedir.LOCK_NAME, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    other = ProcessTable(python=sys.executable, workdir=tmp_path, env={}, report=lambda event: None, log_dir=None)
    other.open()  # its sweep keeps ours
    assert root.is_dir()
    other.close()
    table.close()
    assert not root.exists() and not list(tmp_path.glob(f"{PREFIX}*"))


def test_a_launcher_error_names_the_private_path_that_is_gone(tmp_path):
    gone = tmp_path / "pymp-x" / "listener-1"
    error = "FileNotFoundError: [Errno 2] No such file or directory"
    noted = privatedir.with_lost_note(error, [str(tmp_path), None, str(gone)])
    assert noted.startswith(error) and str(gone) in noted and failure_causes.lost_private_file(noted)
    assert privatedir.with_lost_note(error, [str(tmp_path)]) == error
    assert not failure_causes.lost_private_file(error)
    assert failure_causes.lost_private_file("FileNotFoundError: [Errno 2] No such file or directory: "
                                            f"'/tmp/{PREFIX}5-x/pymp-y/l'")
    assert not failure_causes.lost_private_file("FileNotFoundError: [Errno 2] No such file or directory: "
                                                "'/usr/bin/python9'")
