"""The valid range of every option given in seconds, and the one-line error for a value outside it.

Python reads "nan" and "inf" as floats, and a NaN compares False with everything: left unchecked, --grace nan
crashes the agent, --backoff nan waits forever and --stall-timeout nan turns stall detection off without a word.
So each such option is finite and within a range a run can use. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DAY = 86400.0
WEEK = 7 * DAY


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    #: 0 itself is allowed (for --stall-timeout and --rdzv-timeout it is not: no time at all).
    zero_ok: bool
    example: str


#: Option -> its range and a good value for the error message.
RANGES = {
    "--grace": Range(0.0, DAY, True, "30"),
    "--backoff": Range(0.0, DAY, True, "1"),
    "--backoff-max": Range(0.0, DAY, True, "60"),
    "--stall-timeout": Range(0.0, WEEK, False, "900"),
    "--rdzv-timeout": Range(0.0, WEEK, False, "900"),
    "--fs-settle": Range(0.0, DAY, True, "30"),
    #: pai-launch status --watch's redraw interval.
    "--interval": Range(0.0, 3600.0, False, "2"),
    #: How long pai-launch env waits for its probe of the run's interpreter (importing torch can take a while).
    "--timeout": Range(0.0, 3600.0, False, "60"),
}


def problem(option: str, value: float) -> str | None:
    """Why `value` cannot be `option`'s, as one line naming the fix; None when it is fine."""
    bounds = RANGES[option]
    fine = math.isfinite(value) and bounds.low <= value <= bounds.high and (bounds.zero_ok or value > 0)
    if fine:
        return None
    low = f"{bounds.low:g} <= SECONDS" if bounds.zero_ok else f"{bounds.low:g} < SECONDS"
    return (f"{option} {value:g} is not a number of seconds in range ({low} <= {bounds.high:g}): "
            f"give e.g. {option} {bounds.example}")
