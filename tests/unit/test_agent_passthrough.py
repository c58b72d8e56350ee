"""The agent's output pass-through (passthrough.relay, used on a terminal with the live status line) holds a bounded
piece of a line at a time, however long the line a worker printed without a newline."""

from __future__ import annotations

import os
import threading

import pytest

from pai_launch.supervise.children import passthrough

pytestmark = pytest.mark.timeout(30)


def test_a_line_longer_than_the_limit_goes_out_in_bounded_pieces_and_whole():
    read, write = os.pipe()
    text = b"x" * (3 * passthrough.LINE_LIMIT + 5) + b"\nlast\n"
    writer = threading.Thread(target=lambda: (_write_all(write, text), os.close(write)))
    writer.start()
    pieces: list[bytes] = []
    passthrough.relay(os.fdopen(read, "rb"), pieces.append)
    writer.join(timeout=10)
    assert b"".join(pieces) == text
    assert max(len(piece) for piece in pieces) <= passthrough.LINE_LIMIT
    assert pieces[-1] == b"last\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
