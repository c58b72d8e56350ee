"""Signal handlers that only enqueue: every decision is taken later, on the main loop.

Installed first thing in main(), before anything slow, so a SIGTERM during start-up is not lost. SIGQUIT stops the
run like SIGTERM, and the loop logs where each of pai-launch's threads was (`thread_stacks`), which is what a user
asking for a core dump wants to see.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
import time
import traceback

from pai_launch.core import exitcodes
from pai_launch.core.observations import SignalReceived

HANDLED = exitcodes.HANDLED_SIGNALS


def install(inbox: queue.SimpleQueue) -> None:
    def enqueue(signum: int, frame: object) -> None:
        inbox.put(SignalReceived(signum, time.monotonic()))  # SimpleQueue.put is safe in a handler

    for signum in HANDLED:
        signal.signal(signum, enqueue)


def thread_stacks() -> str:
    """Every thread of this process with its stack, innermost call last (as a traceback reads)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f"thread {names.get(ident, '?')} ({ident}):\n" + "".join(traceback.format_stack(frame)).rstrip())
    return "\n".join(parts)
