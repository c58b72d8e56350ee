"""pai-launch's console when it goes away: writes to a broken pipe, a full device or a closed fd are dropped and the
first failure of each stream is told once; fds 0-2 closed at start get /dev/null (seen in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pai_launch.supervise.outputs import console

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def heard():
    """What the console's listener hears; the module's record of losses is cleared before and after."""
    got: list[tuple[str, str]] = []
    console._lost.clear()
    console.watch(lambda name, error: got.append((name, error)))
    yield got
    console.watch(None)
    console._lost.clear()


def test_a_write_to_a_pipe_whose_reader_quit_is_dropped_and_told_once(heard):
    read, write = os.pipe()
    os.close(read)
    stream = console.DroppingStream("stderr", write)
    try:
        assert stream.write("one line\n") == len("one line\n")
        stream.write("another\n")
        stream.buffer.write(b"bytes too\n")
        stream.flush()
    finally:
        os.close(write)
    assert len(heard) == 1 and heard[0][0] == "stderr" and heard[0][1].startswith("BrokenPipeError"), heard


def test_a_full_device_and_a_closed_fd_are_dropped_and_each_stream_told_once(heard):
    full = os.open("/dev/full", os.O_WRONLY)
    closed = os.open(os.devnull, os.O_WRONLY)
    os.close(closed)
    try:
        console.DroppingStream("stdout", full).write("x" * 10 + "\n")
        console.DroppingStream("stderr", closed).write("y\n")
        late = console.DroppingStream("stderr", closed)
        late.write("z")
        late.flush()
    finally:
        os.close(full)
    assert [name for name, _ in heard] == ["stdout", "stderr"]
    assert "No space left" in heard[0][1] and "Bad file descriptor" in heard[1][1]
    assert console.lost().keys() == {"stdout", "stderr"}


def test_a_listener_that_comes_later_hears_of_an_earlier_loss(heard):
    console.watch(None)
    read, write = os.pipe()
    os.close(read)
    console.DroppingStream("stdout", write).write("lost\n")
    os.close(write)
    late: list[tuple[str, str]] = []
    console.watch(lambda name, error: late.append((name, error)))
    assert [name for name, _ in late] == ["stdout"] and heard == []


def test_a_message_and_its_newline_go_out_in_one_write_and_a_flush_sends_the_rest(heard):
    read, write = os.pipe()
    os.set_blocking(read, False)
    stream = console.DroppingStream("stderr", write)
    try:
        stream.write('{"event": "run_started"}')
        with pytest.raises(BlockingIOError):
            os.read(read, 100)  # held until its line is whole
        stream.buffer.write(b"[rank0]: a worker line\n")  # a worker's bytes go out at once, never inside a log line
        stream.write("\n")
        stream.write("partial")
        stream.flush()
        assert os.read(read, 1000) == b'[rank0]: a worker line\n{"event": "run_started"}\npartial'
    finally:
        os.close(read)
        os.close(write)
    assert heard == []


def test_whole_text_reaches_a_working_fd(heard):
    read, write = os.pipe()
    stream = console.DroppingStream("stdout", write)
    stream.write("héllo\n")
    stream.buffer.write(b"raw\n")
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        assert handle.read() == "héllo\n".encode() + b"raw\n"
    assert heard == []


@pytest.mark.parametrize("closed", ["0", "1", "2", "0 1 2"])
@pytest.mark.proc  # starts processes
def test_closed_std_fds_get_dev_null_before_anything_else_is_opened(tmp_path, closed):
    probe = (
        "import os, sys\n"
        f"for fd in ({closed.replace(' ', ', ')},): os.close(fd)\n"
        "from pai_launch.supervise.outputs import console\n"
        "console.install()\n"
        "spare = os.open(os.devnull, os.O_RDONLY)\n"  # the next file opened lands above 2
        "targets = [os.readlink(f'/proc/self/fd/{fd}') for fd in (0, 1, 2)]\n"
        "inherited = [os.get_inheritable(fd) for fd in (0, 1, 2)]\n"
        "print('printed', flush=True)\n"
        "sys.stderr.write('written\\n')\n"
        f"open({str(tmp_path / 'out')!r}, 'w').write(repr((spare, targets, inherited)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=20)
    assert done.returncode == 0, done.stderr
    spare, targets, inherited = eval((tmp_path / "out").read_text())
    assert spare > 2 and inherited == [True, True, True]  # a child started now gets them too
    for fd in map(int, closed.split()):
        assert targets[fd] == os.devnull, targets
