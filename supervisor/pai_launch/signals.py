"""Signal handlers that only enqueue: every decision is taken later, on the main loop.

Installed first thing in main(), before anything slow, so a SIGTERM during start-up is not lost.
"""

from __future__ import annotations

import queue
import signal
import time

from pai_launch.events import SignalReceived

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def install(inbox: queue.SimpleQueue) -> None:
    def enqueue(signum: int, frame: object) -> None:
        inbox.put(SignalReceived(signum, time.monotonic()))  # SimpleQueue.put is safe in a handler

    for signum in HANDLED:
        signal.signal(signum, enqueue)
