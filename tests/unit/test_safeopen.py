"""The safe opens of pai-launch's own files: only regular files, no link followed, no block on a pipe, a size bound;
and the mode of what is written follows the umask."""

import os
import socket
import stat

import pytest

from pai_launch.savefmt import safeopen
from pai_launch.savefmt.atomic import write_atomically

pytestmark = pytest.mark.timeout(30)


def _make(kind: str, path):
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        (path.parent / "target").write_text("{}")
        path.symlink_to(path.parent / "target")
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        return sock
    return None


WORDS = {"fifo": "a named pipe (FIFO)", "directory": "a directory", "symlink": "a symbolic link", "socket": "a socket"}


@pytest.mark.parametrize("kind", sorted(WORDS))
@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_RDWR | os.O_APPEND | os.O_CREAT], ids=["read", "append"])
def test_anything_but_a_regular_file_is_refused_by_name_without_blocking(tmp_path, kind, flags):
    path = tmp_path / "state.json"
    keep = _make(kind, path)
    try:
        with pytest.raises(safeopen.WrongKind) as caught:
            safeopen.open_fd(path, flags)
    finally:
        if keep is not None:
            keep.close()
    assert caught.value.kind == WORDS[kind]
    assert str(caught.value).startswith(f"{path} is {WORDS[kind]}, not a regular file")
    assert "move it aside" in str(caught.value)


def test_a_regular_file_opens_blocking_and_close_on_exec(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("x")
    fd = safeopen.open_fd(path)
    try:
        assert os.get_blocking(fd) and not os.get_inheritable(fd)
        assert os.read(fd, 10) == b"x"
    finally:
        os.close(fd)


def test_read_bytes_refuses_a_huge_sparse_file_before_reading_it(tmp_path):
    path = tmp_path / "state.json"
    with open(path, "wb") as handle:
        handle.truncate(1536 * 1024 * 1024)  # sparse: reading it whole would take 1.5 GB
    with pytest.raises(safeopen.TooLarge, match="1610612736 bytes, more than the 16777216"):
        safeopen.read_bytes(path, safeopen.MAX_RECORD)
    assert safeopen.read_bytes(_small(tmp_path), 10) == b"0123456789"


def _small(tmp_path):
    path = tmp_path / "small"
    path.write_bytes(b"0123456789")
    return path


def test_read_bytes_of_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        safeopen.read_bytes(tmp_path / "absent")


def test_open_append_creates_a_file_with_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        with safeopen.open_append(tmp_path / "events.jsonl") as handle:
            handle.write("line\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "events.jsonl").st_mode) == 0o640


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_end_with_the_mode_the_umask_gives(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        assert safeopen.umask() == mask
        write_atomically(tmp_path / "state.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "state.json").st_mode) == mode


def test_real_folder_refuses_a_link_to_a_folder(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "quarantine").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(safeopen.WrongKind, match="is a symbolic link, not a directory"):
        safeopen.real_folder(tmp_path / "quarantine")
    safeopen.real_folder(tmp_path / "elsewhere")


def test_waiting_for_a_file_to_show_never_blocks_on_a_pipe_in_its_place(tmp_path):
    from pai_launch.savefmt import savedir

    os.mkfifo(tmp_path / "coordinator")
    assert savedir.wait_shown(tmp_path / "coordinator", 0.1) is False
    (tmp_path / "token").write_text("abc\n")
    assert savedir.wait_shown(tmp_path / "token", 0.1, content="abc") is True


def test_a_directory_where_the_lock_belongs_is_named_as_one_not_as_a_permission_problem(tmp_path):
    from pai_launch.supervise.folder.savefolder import folder_error

    (tmp_path / "lock.node0").mkdir()
    message = folder_error(tmp_path, IsADirectoryError(21, "Is a directory", str(tmp_path / "lock.node0")))
    assert "lock.node0 is a directory, not a regular file" in message and "permissions" not in message
    denied = folder_error(tmp_path, PermissionError(13, "Permission denied", str(tmp_path / "lock.node0")))
    assert denied.endswith("Permission denied: check its permissions")


def test_a_pipe_as_the_adoption_record_is_refused_without_blocking(tmp_path):
    from pai_launch.savefmt import adoptions

    os.mkfifo(tmp_path / adoptions.RECORD_NAME)
    with pytest.raises(adoptions.AdoptionRecordError, match=r"is a named pipe \(FIFO\), not a regular file"):
        adoptions.load(tmp_path)


def test_quarantine_refuses_a_link_in_place_of_its_folder_and_moves_nothing(tmp_path):
    from pai_launch.savefmt import checkpoint

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".pai-launch").mkdir()
    (tmp_path / ".pai-launch" / "quarantine").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "switch_2.pt").write_bytes(b"torn")
    from pai_launch.savefmt.statedir import UnsafeStateDir

    with pytest.raises(UnsafeStateDir, match="quarantine is a symbolic link"):
        checkpoint.quarantine(tmp_path, "switch_2.pt")
    assert (tmp_path / "switch_2.pt").read_bytes() == b"torn" and os.listdir(tmp_path / "elsewhere") == []
