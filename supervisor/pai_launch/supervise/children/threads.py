"""The supervisor's helper threads, which never die silently.

The loop waits for what its threads report (a child's exit, a generation's result). A thread that
raised would leave it waiting forever, so every thread reports its exception as ThreadFailed, which
ends the run as an internal error with every process stopped.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable

from pai_launch.core.observations import ThreadFailed

#: Where a thread (or a child's) news goes: the loop's inbox (its `put`).
Report = Callable[[object], None]


def start_guarded(target: Callable[[], None], *, name: str, report: Report) -> threading.Thread:
    """Run `target` in a daemon thread; an exception in it goes to `report` as ThreadFailed."""

    def guarded() -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - whatever it is, the loop must hear of it
            report(ThreadFailed(name, f"{type(exc).__name__}: {exc}", traceback.format_exc()))

    thread = threading.Thread(target=guarded, name=name, daemon=True)
    thread.start()
    return thread
