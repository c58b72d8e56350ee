"""The run as a picture: the init run and each generation as a bar on a time axis, restart gaps between them,
failures marked, dendrite additions as dotted lines, and the best validation score on a second y axis.

The layout (spans, score points) is pure; matplotlib is imported only to draw, with its Agg canvas (no pyplot,
no display), and its absence is one line.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pai_launch.savefmt.atomic import write_atomically
from pai_launch.savefmt.pai_files import best_so_far
from pai_launch.savefmt.savedir import switch_number
from pai_launch.status.model import COMPLETE, FAILED, REJECTED, RESTRUCTURED, RUNNING, STOPPED, RunStatus, StatusError
from pai_launch.status.summary import duration

COLOURS = {"init": "#9e9e9e", RESTRUCTURED: "#43a047", REJECTED: "#9ccc65", COMPLETE: "#1e88e5", FAILED: "#e53935",
           STOPPED: "#fb8c00",
           RUNNING: "#fdd835", "no progress": "#8e24aa", "interrupted": "#6d4c41", "unknown": "#bdbdbd"}


@dataclass
class Span:
    label: str
    start: float
    end: float
    kind: str  # "init", a generation's outcome, or "gap"


def spans(status: RunStatus) -> list[Span]:
    """The init run, each generation, and the gaps between them, in seconds since the epoch."""
    found: list[Span] = []
    init = status.init
    if init is not None and init.started is not None:
        end = init.started + init.duration if init.duration is not None else status.now
        found.append(Span("init", init.started, end, "init"))
    for g in status.generations:
        if g.started is None:
            continue
        start = max(g.started, found[-1].end) if found else g.started  # whole-second stamps may overlap a little
        end = g.started + g.duration if g.duration is not None else (status.now if g.outcome == RUNNING else start)
        if found and start - found[-1].end > 0.05 and not g.inferred:
            found.append(Span("", found[-1].end, start, "gap"))
        found.append(Span(f"g{g.number}", start, max(end, start), g.outcome))
    return found


def score_points(status: RunStatus) -> list[tuple[float, float]]:
    """(time, best score so far) per epoch: each generation's epochs spread over its bar. A generation that added
    dendrite k trained up to that dendrite's epoch (switch_epochs.csv); the one that completed, to the last epoch."""
    series = best_so_far(status.scores.epochs, status.scores.direction)
    if not series:
        return []
    bounds: list[tuple[float, float, int]] = []  # (start, end, last epoch)
    for g in status.generations:
        if g.started is None:
            continue
        end = g.started + (g.duration if g.duration is not None else max(0.0, status.now - g.started))
        numbers = [n for n in (switch_number(f) for f in g.switch_files) if n]
        k = max(numbers) // 2 if numbers else 0
        if g.outcome == RESTRUCTURED and 1 <= k <= len(status.dendrites.epochs):
            bounds.append((g.started, end, status.dendrites.epochs[k - 1]))
        elif g.outcome in (COMPLETE, RUNNING) or g is status.generations[-1]:
            bounds.append((g.started, end, series[-1][0]))
    if not bounds:
        return []
    points: list[tuple[float, float]] = []
    last = series[0][0] - 1
    for start, end, upto in bounds:
        chunk = [(e, s) for e, s in series if last < e <= upto]
        for i, (_, score) in enumerate(chunk):
            points.append((start + (end - start) * (i + 1) / len(chunk), score))
        last = max(last, upto)
    return points


def _canvas():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise StatusError(f"--timeline needs matplotlib, which cannot be imported ({exc}): pip install "
                          "matplotlib") from None
    figure = Figure(figsize=(11, 4), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def draw_timeline(status: RunStatus, png: Path) -> None:
    """Write the picture to `png` (atomically: a temp file renamed over it)."""
    figure = _canvas()
    axis = figure.add_subplot(1, 1, 1)
    found = spans(status)
    origin = found[0].start if found else (status.started or status.now)
    scale, unit = (60.0, "min") if found and found[-1].end - origin > 600 else (1.0, "s")

    def x(t: float) -> float:
        return (t - origin) / scale

    seen: set[str] = set()  # what the legend already names
    _draw_spans(axis, found, x, seen)
    _draw_generation_ends(axis, status, x, seen)
    axis.set_ylim(-1, 1)
    axis.set_yticks([])
    axis.set_xlabel(f"time since the run started ({unit})")
    _draw_scores(axis, status, x)
    dendrites = status.dendrites.count
    axis.set_title(f"{Path(status.save).name}: {status.state}, {len(status.generations)} generation(s), "
                   f"{'?' if dendrites is None else dendrites} dendrite(s), {duration(status.elapsed)}", fontsize=10)
    if seen:
        axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, ncol=8, frameon=False)
    figure.tight_layout()
    _save(figure, Path(png))


def _draw_spans(axis, found: list[Span], x: Callable[[float], float], seen: set[str]) -> None:
    """A bar per span, coloured by its kind and labelled (a restart gap hatched, thinner); each kind named once."""
    for span in found:
        width = max(x(span.end) - x(span.start), 0.002 * max(1.0, x(found[-1].end)))
        if span.kind == "gap":
            axis.barh(0, width, left=x(span.start), height=0.25, color="#e0e0e0", hatch="//", edgecolor="#9e9e9e",
                      label=None if "gap" in seen else "restart gap")
        else:
            axis.barh(0, width, left=x(span.start), height=0.5, color=COLOURS.get(span.kind, "#bdbdbd"),
                      edgecolor="black",
                      linewidth=0.5, label=None if span.kind in seen else span.kind)
            axis.text(x(span.start) + width / 2, 0, span.label, ha="center", va="center", fontsize=8)
        seen.add(span.kind)


def _draw_generation_ends(axis, status: RunStatus, x: Callable[[float], float], seen: set[str]) -> None:
    """A cross where a generation failed, a dotted line where one added dendrites."""
    for g in status.generations:
        if g.started is None or g.duration is None:
            continue
        end = x(g.started + g.duration)
        if g.outcome == FAILED:
            axis.plot([end], [0.42], marker="X", color=COLOURS[FAILED], markersize=10, linestyle="none",
                      label=None if "failure" in seen else "failure")
            seen.add("failure")
        elif g.outcome == RESTRUCTURED:
            axis.axvline(end, color="#2e7d32", linestyle=":", linewidth=1)


def _draw_scores(axis, status: RunStatus, x: Callable[[float], float]) -> None:
    """The best score so far as a step line on a second y axis, with its own legend; nothing without scores."""
    points = score_points(status)
    if not points:
        return
    scores = axis.twinx()
    label = "best score so far" if status.scores.best is not None else "validation score"
    scores.step([x(t) for t, _ in points], [s for _, s in points], where="post", color="#000000", linewidth=1.4,
                marker=".", label=label)
    scores.set_ylabel(f"{label} ({status.scores.direction or 'direction unknown'})")
    scores.legend(loc="upper right", fontsize=8, framealpha=0.8)


def _save(figure, png: Path) -> None:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    try:
        write_atomically(png, buffer.getvalue())
    except OSError as exc:
        folder = png.parent if str(png.parent) else Path(".")
        raise StatusError(f"cannot write {png}: {exc.strerror or exc}: check that {folder} exists and is "
                          "writable") from None
