"""The save folder's locks against what another local user can do: a squatted lock name, a planted symbolic link, a
folder or lock file that is not ours. The decisions are pure (who is believed, what a refusal says); the files and
sockets here are real. The same faults with a real second user are in tests/proc/test_launch_local_users.py."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pai_launch.savefmt import statedir
from pai_launch.savefmt.folderlock import LockHeld, held_message
from pai_launch.savefmt.locks import SaveFolderLock
from pai_launch.savefmt.pathlock import PathLock, Peer, trusted
from pai_launch.savefmt.record import StateError

pytestmark = pytest.mark.timeout(30)


# --- who holds the path lock, and what a refusal names (pure) -----------------------------------------
@pytest.mark.parametrize(("peer", "euid", "believed"), [
    (Peer(100, 1000), 1000, True),     # the same user: a second pai-launch of ours
    (Peer(100, 0), 1000, True),        # root: could stop us anyway
    (Peer(100, 0), 0, True),
    (Peer(100, 2000), 1000, False),    # another user: squats the predictable name
    (Peer(100, 1000), 0, False),       # root does not yield to an ordinary user's socket
    (None, 1000, False),               # bound, but nothing listens: no pai-launch does that
])
def test_only_the_same_user_or_root_is_believed_to_hold_the_path_lock(peer, euid, believed):
    assert trusted(peer, euid) is believed


def test_a_refused_flock_names_a_pid_only_when_the_kernel_shows_it_holding():
    save, lock = Path("/s"), Path("/s/.pai-launch/lock.node0")
    assert "another pai-launch (PID 42)" in held_message(save, lock, "42", [42])
    dead = held_message(save, lock, "42", [77])  # the file names a dead pid; someone else holds the flock
    assert "PID 77" in dead and "another pai-launch (PID 42)" not in dead
    remote = held_message(save, lock, "42", [])  # a holder this machine cannot see (NFS, another PID namespace)
    assert "another machine or container" in remote and "another pai-launch (PID" not in remote
    assert "another pai-launch (PID" not in held_message(save, lock, "42", [0])
    assert "another pai-launch (PID" not in held_message(save, lock, "42", None)


def test_a_folder_or_file_of_another_user_or_a_link_is_refused_in_one_line(tmp_path):
    target = tmp_path / "x"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    me = os.geteuid()
    assert "symbolic link" in statedir.problem(link, os.lstat(link), me, want_dir=True)
    other = statedir.problem(target, os.lstat(target), me + 1, want_dir=True)
    assert f"uid {me + 1}" in other and "run pai-launch as its owner" in other and "\n" not in other
    assert "not a regular file" in statedir.problem(target, os.lstat(target), me, want_dir=False)
    assert statedir.problem(target, os.lstat(target), me, want_dir=True) is None


# --- the files, for real -------------------------------------------------------------------------------
def test_the_lock_file_and_its_folder_are_the_users_and_closed_to_others(tmp_path):
    save = tmp_path / "PAI"
    lock = SaveFolderLock(save)
    lock.acquire()
    try:
        folder = os.lstat(save / ".pai-launch")
        file = os.lstat(lock.path)
        assert stat.S_IMODE(file.st_mode) == 0o600 and file.st_uid == os.geteuid()
        assert folder.st_uid == os.geteuid() and not folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    finally:
        lock.release()


def test_an_older_world_readable_lock_file_and_a_group_writable_folder_are_closed(tmp_path):
    save = tmp_path / "PAI"
    (save / ".pai-launch").mkdir(parents=True)
    os.chmod(save / ".pai-launch", 0o777)
    (save / ".pai-launch" / "lock.node0").write_text("1\n")
    os.chmod(save / ".pai-launch" / "lock.node0", 0o666)
    lock = SaveFolderLock(save)
    lock.acquire()
    lock.release()
    assert stat.S_IMODE(os.lstat(save / ".pai-launch").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(save / ".pai-launch" / "lock.node0").st_mode) == 0o600


@pytest.mark.parametrize("write", [True, False])
def test_a_planted_link_at_the_lock_file_is_refused_and_its_target_untouched(tmp_path, write):
    save = tmp_path / "PAI"
    (save / ".pai-launch").mkdir(parents=True)
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    (save / ".pai-launch" / "lock.node0").symlink_to(target)

    with pytest.raises(StateError, match="lock.node0 is a symbolic link") as refused:
        SaveFolderLock(save).acquire(write=write)

    assert "\n" not in str(refused.value)
    assert target.read_text() == "keep me\n"
    # The path lock was let go with the refusal: the folder is free once the link is gone.
    (save / ".pai-launch" / "lock.node0").unlink()
    again = SaveFolderLock(save)
    again.acquire()
    again.release()


@pytest.mark.parametrize("write", [True, False])
def test_a_pai_launch_folder_that_is_a_link_is_refused_and_nothing_made_where_it_points(tmp_path, write):
    save = tmp_path / "PAI"
    save.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (save / ".pai-launch").symlink_to(elsewhere)

    with pytest.raises(StateError, match=r"\.pai-launch is a symbolic link"):
        SaveFolderLock(save).acquire(write=write)
    with pytest.raises(StateError, match=r"\.pai-launch is a symbolic link"):
        statedir.check(save)
    assert list(elsewhere.iterdir()) == []


def test_a_dangling_link_at_the_lock_file_is_not_created_through(tmp_path):
    save = tmp_path / "PAI"
    (save / ".pai-launch").mkdir(parents=True)
    target = tmp_path / "would-be-created"
    (save / ".pai-launch" / "lock.node0").symlink_to(target)
    with pytest.raises(StateError, match="symbolic link"):
        SaveFolderLock(save).acquire()
    assert not target.exists()


@pytest.mark.proc  # starts processes
def test_a_socket_that_never_listens_on_the_lock_name_does_not_block_the_folder(tmp_path):
    save = tmp_path / "PAI"
    squat = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    squat.bind(PathLock(save).address)  # bound, never listening: nobody's pai-launch
    try:
        lock = SaveFolderLock(save)
        lock.acquire()
        try:
            assert lock.squatted is not None and lock.squatted["holder"] == "a socket that does not listen"
            # The flock still keeps a second pai-launch out, and names the real holder.
            second = subprocess.run(
                [sys.executable, "-c", "import sys; from pathlib import Path; from pai_launch.savefmt.locks import "
                 "SaveFolderLock\n"
                 "try:\n    SaveFolderLock(Path(sys.argv[1])).acquire()\nexcept Exception as e:\n    print(e)",
                 str(save)],
                capture_output=True, text=True, timeout=30)
            assert f"another pai-launch (PID {os.getpid()})" in second.stdout, second
        finally:
            lock.release()
    finally:
        squat.close()


def test_our_own_listening_socket_on_the_name_still_refuses_a_second_holder(tmp_path):
    save = tmp_path / "PAI"
    first = SaveFolderLock(save)
    first.acquire(write=False)
    try:
        with pytest.raises(LockHeld, match=f"another pai-launch \\(PID {os.getpid()}\\)"):
            SaveFolderLock(save).acquire()
        assert first.squatted is None
    finally:
        first.release()


def test_a_link_planted_at_the_quarantine_folder_is_refused_and_the_torn_file_stays(tmp_path):
    from pai_launch.savefmt import checkpoint

    save = tmp_path / "PAI"
    (save / ".pai-launch").mkdir(parents=True)
    elsewhere = tmp_path / "root-only"
    elsewhere.mkdir(mode=0o700)
    (save / ".pai-launch" / "quarantine").symlink_to(elsewhere)
    (save / "switch_2.pt").write_bytes(b"torn")

    with pytest.raises(StateError, match="quarantine is a symbolic link"):
        checkpoint.quarantine(save, "switch_2.pt")

    assert (save / "switch_2.pt").read_bytes() == b"torn" and list(elsewhere.iterdir()) == []
    (save / ".pai-launch" / "quarantine").unlink()
    moved = checkpoint.quarantine(save, "switch_2.pt")  # a real folder of ours: moved aside as before
    assert moved.parent == save / ".pai-launch" / "quarantine" and moved.read_bytes() == b"torn"


def test_the_path_lock_answers_any_number_of_probes(tmp_path):
    """Each probe's connection is taken and closed: after more probes than the listen backlog, the holder is still
    seen (before, the 18th probe found the backlog full and saw no one)."""
    from pai_launch.savefmt.pathlock import PathLock, peer_of

    lock = PathLock(tmp_path)
    lock.acquire()
    try:
        peers = [peer_of(lock.address, tries=1) for _ in range(60)]
        assert all(peer is not None and peer.pid == os.getpid() for peer in peers)
    finally:
        lock.release()
    assert peer_of(lock.address, tries=1) is None


def test_a_probe_waits_out_a_full_backlog_while_the_holder_catches_up():
    """A holder whose probe-taking thread lags (a loaded machine) has a full backlog: a probe's connect gets EAGAIN.
    That says someone listens, so the probe waits for a free slot instead of reporting nobody."""
    import socket
    import threading

    from pai_launch.savefmt.pathlock import peer_of

    address = f"\0pai-launch/test/backlog/{os.getpid()}"
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    holder.bind(address)
    holder.listen(0)
    waiting = []
    try:
        while True:  # fill the backlog with connections nobody takes yet
            filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            filler.setblocking(False)
            try:
                filler.connect(address)
            except BlockingIOError:
                filler.close()
                break
            waiting.append(filler)
        assert waiting, "the backlog took no connection at all"
        taken = threading.Event()

        def take_after_a_while():
            taken.wait(0.3)
            for _ in waiting:
                holder.accept()[0].close()

        worker = threading.Thread(target=take_after_a_while, daemon=True)
        worker.start()
        peer = peer_of(address, tries=1)
        worker.join(5)
        assert peer is not None and peer.pid == os.getpid()
    finally:
        for filler in waiting:
            filler.close()
        holder.close()
