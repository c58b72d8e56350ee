"""Where a child's output goes: straight to pai-launch's own stdout or stderr, or through the live status line when
the run shows one (so the line is never torn by theirs).

A relay holds a bounded piece of a line at a time, however long the line a worker printed without a newline.
"""

from __future__ import annotations

import sys

from pai_launch.supervise.outputs import liveline

#: The most of one line the pass-through holds at once: a longer one goes out in pieces of this size.
LINE_LIMIT = 1 << 20


def writer(stream: str, live: liveline.LiveLine | None):
    """Where a child's lines for our `stream` go: through the live status line when there is one."""
    if live is not None:
        return lambda data: live.write_output(stream, data)
    target = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer

    def write(data: bytes) -> None:
        try:
            target.write(data)
            target.flush()
        except (OSError, ValueError):
            pass
    return write


def relay(pipe, write) -> None:
    for line in iter(lambda: pipe.readline(LINE_LIMIT), b""):
        write(line)
    pipe.close()
