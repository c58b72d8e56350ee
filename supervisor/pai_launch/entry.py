"""The `pai-launch` console script: signal handlers first, then everything slow."""

from __future__ import annotations

import queue
import sys

from pai_launch import signals


def main(argv: list[str] | None = None) -> None:
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    signals.install(inbox)  # before importing typer and friends: a SIGTERM now is queued, not lost
    from pai_launch import cli

    sys.exit(cli.run_command_line(sys.argv[1:] if argv is None else argv, inbox))
