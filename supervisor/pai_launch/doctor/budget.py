"""A time budget for one check: a launch runs doctor before every start, and must not wait on a huge script.

The walk asks the Deadline between statements, expressions, files and checks, and it raises OutOfTime there: no
thread is interrupted, and with an injected clock a test runs out of time exactly where it means to.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class OutOfTime(Exception):
    """The check used up its budget; str() is one line. Not a DoctorError: the script may be fine, only large."""


class Deadline:
    """`seconds` from now on `clock` (None: never)."""

    def __init__(self, seconds: float | None, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self.clock = clock
        self.ends = None if seconds is None else clock() + seconds

    def check(self) -> None:
        """Raise OutOfTime once the budget is spent."""
        if self.ends is not None and self.clock() >= self.ends:
            raise OutOfTime(f"doctor gave up after {self.seconds:g} s")


UNLIMITED = Deadline(None)
