"""Which ranks' output reaches the console, from torchrun's --redirects, --tee and --local-ranks-filter. Pure.

pai-launch always writes every rank's stdout and stderr to files (kept with --log-dir) and relays them to its console.
So torchrun's `--tee` (console and a file) is what it does anyway; `--redirects` (a file only) keeps a stream off the
console, which needs --log-dir to keep the file; `--local-ranks-filter` shows only the ranks listed. Both take
torchrun's values: 0 nothing, 1 stdout, 2 stderr, 3 both, for every local rank (`3`) or rank by rank (`0:1,1:2`).
"""

from __future__ import annotations

from pai_launch.placement.spec import PreflightError

#: torchrun's Std values: which streams each names.
STREAMS = {0: (), 1: ("stdout",), 2: ("stderr",), 3: ("stdout", "stderr")}


def parse_streams(option: str, text: str) -> dict[int | None, tuple[str, ...]]:
    """'3' -> {None: both} (every local rank); '0:1,1:2' -> {0: stdout, 1: stderr}."""
    text = text.strip()
    if ":" not in text:
        return {None: _streams(option, text)}
    by_rank: dict[int | None, tuple[str, ...]] = {}
    for item in text.split(","):
        rank, sep, value = item.partition(":")
        if not sep or not _natural(rank):
            raise PreflightError(f"{option} {text!r}: {item!r} is not LOCAL_RANK:STREAMS: give e.g. {option} 3 or "
                                 f"{option} 0:1,1:2 (0 none, 1 stdout, 2 stderr, 3 both)")
        if int(rank) in by_rank:
            raise PreflightError(f"{option} {text!r} names local rank {int(rank)} twice: give each rank once, e.g. "
                                 f"{option} {int(rank)}:3")
        by_rank[int(rank)] = _streams(option, value)
    return by_rank


def _streams(option: str, value: str) -> tuple[str, ...]:
    value = value.strip()
    if not _natural(value) or int(value) not in STREAMS:
        raise PreflightError(f"{option} {value!r} is not 0, 1, 2 or 3 (none, stdout, stderr, both): give e.g. {option} "
                             "3")
    return STREAMS[int(value)]


def parse_ranks(option: str, text: str) -> frozenset[int] | None:
    """'0,2' -> {0, 2}; '' -> None (every rank)."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        return None
    bad = [item for item in items if not _natural(item)]
    if bad:
        raise PreflightError(f"{option} {text!r}: {bad[0]!r} is not a local rank: give ranks such as {option} 0,1")
    return frozenset(int(item) for item in items)


def _within(option: str, text: str, ranks, nproc: int) -> None:
    """PreflightError for a local rank this machine does not run (its workers are 0..nproc-1)."""
    beyond = sorted(rank for rank in ranks if rank is not None and rank >= nproc)
    if beyond:
        raise PreflightError(f"{option} {text!r} names local rank {beyond[0]}, but this machine runs {nproc} "
                             "worker(s), "
                             f"local ranks 0..{nproc - 1}: name ranks below {nproc}")


def muted(nproc: int, redirects: str, tee: str, local_ranks: str) -> tuple[tuple[int, str], ...]:
    """(local rank, stream) pairs the console does not show: redirected and not teed, or outside the filter."""
    redirected = parse_streams("--redirects", redirects)
    teed = parse_streams("--tee", tee)
    shown_ranks = parse_ranks("--local-ranks-filter", local_ranks)
    for option, text, ranks in (("--redirects", redirects, redirected), ("--tee", tee, teed),
                                ("--local-ranks-filter", local_ranks, shown_ranks or ())):
        _within(option, text, ranks, nproc)
    quiet = []
    for rank in range(nproc):
        for stream in ("stdout", "stderr"):
            off = stream in redirected.get(rank, redirected.get(None, ()))
            on = stream in teed.get(rank, teed.get(None, ()))
            if (off and not on) or (shown_ranks is not None and rank not in shown_ranks):
                quiet.append((rank, stream))
    return tuple(quiet)


def redirects_any(redirects: str) -> bool:
    """Whether --redirects sends some stream to a file only."""
    return any(parse_streams("--redirects", redirects).values())


def _natural(text: str) -> bool:
    text = text.strip()
    return text.isascii() and text.isdigit()
