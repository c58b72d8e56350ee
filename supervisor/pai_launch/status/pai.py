"""For a folder pai-launch never ran: the init run and generations PerforatedAI's switch files imply (scores and
dendrites themselves are read by savefmt.pai_files, the one reader the live supervisor shares).

Pure: file times in, dataclasses out.
"""

from __future__ import annotations

from pai_launch.status.model import COMPLETE, RESTRUCTURED, UNKNOWN, Generation, InitRun


def inferred_run(switches: dict[int, float], init_time: float | None, marker_time: float | None,
                 latest_time: float | None) -> tuple[InitRun | None, list[Generation]]:
    """The init run and generations a folder's files imply when no pai-launch ran it: one generation ended by each
    switch_N.pt (at its time), one more ended by the completion marker, or one that wrote latest.pt after the last
    switch file (still running, or stopped). Times are the files' modification times."""
    init = InitRun(started=init_time, exit="exit code 0", ok=True, inferred=True) if init_time is not None else None
    generations: list[Generation] = []
    start = init_time

    def add(end: float, outcome: str, files: list[str], detail: str) -> None:
        nonlocal start
        duration = end - start if start is not None and end >= start else None
        generations.append(Generation(number=len(generations) + 1, started=start, duration=duration, outcome=outcome,
                                      detail=detail, switch_files=files, inferred=True))
        start = end

    for number in sorted(switches):
        add(switches[number], RESTRUCTURED, [f"switch_{number}.pt"], "dendrites added")
    if marker_time is not None:
        add(marker_time, COMPLETE, [], "training complete")
    elif latest_time is not None and (start is None or latest_time > start + 1.0):
        add(latest_time, UNKNOWN, [], "latest.pt was written after the last switch file: running, or stopped")
    return init, generations
