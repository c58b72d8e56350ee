"""What PerforatedAI's own files say: validation scores, dendrites added, and (for a folder pai-launch never ran)
the generations its switch files imply.

Pure: file contents and file times in, dataclasses out. PerforatedAI writes these files non-atomically, so a
row that does not parse is skipped rather than trusted.
"""

from __future__ import annotations

import csv
import io
import json

from pai_launch.status_model import COMPLETE, RESTRUCTURED, UNKNOWN, Dendrites, Generation, InitRun, Scores

#: Epochs looked back over for the trend of the best score.
TREND_WINDOW = 3


def rows(text: str) -> list[list[str]]:
    """A CSV's data rows (the header dropped); empty for an empty or unreadable file."""
    try:
        found = list(csv.reader(io.StringIO(text)))
    except csv.Error:
        return []
    return [row for row in found[1:] if row]


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value else None  # NaN: not a score


def _int(text: str) -> int | None:
    value = _float(text)
    return int(value) if value is not None else None


def prefix(names: list[str], folder_name: str) -> str:
    """The `<save>` in `<save>Scores.csv`: from `<save>_config.json`, else the folder's name."""
    configs = sorted((n for n in names if n.endswith("_config.json")), key=len)
    return configs[0][: -len("_config.json")] if configs else folder_name


def config_facts(text: str | None) -> dict:
    """maximizing_score and max_dendrites from `<save>_config.json` (whatever of them it holds)."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {key: data[key] for key in ("maximizing_score", "max_dendrites") if key in data}


def score_series(text: str) -> list[tuple[int, float]]:
    """(epoch, validation score) from `<save>Scores.csv`: its "Validation Scores" column, rows that have one."""
    series = []
    for row in rows(text):
        if len(row) < 2:
            continue
        epoch, score = _int(row[0]), _float(row[1])
        if epoch is not None and score is not None:
            series.append((epoch, score))
    return series


def switch_epochs(text: str) -> list[int]:
    """The epoch of each switch in `<save>switch_epochs.csv` (two switches per dendrite added)."""
    return [epoch for epoch in (_int(row[1]) for row in rows(text) if len(row) >= 2) if epoch is not None]


def infer_direction(series: list[tuple[int, float]], maximizing: object, config_name: str,
                    arch_text: str | None, first_switch: int | None) -> tuple[str | None, str]:
    """("maximizing" | "minimizing" | None, how that was decided)."""
    if isinstance(maximizing, bool):
        return ("maximizing" if maximizing else "minimizing"), f"{config_name} says maximizing_score {str(maximizing).lower()}"
    if arch_text and first_switch is not None:  # PerforatedAI's best score of the first architecture is its min or its max
        arch = [v for v in (_float(row[1]) for row in rows(arch_text) if len(row) >= 2) if v is not None]
        before = [score for epoch, score in series if epoch <= first_switch]
        if arch and before and min(before) != max(before):
            if arch[0] == min(before):
                return "minimizing", "inferred: PerforatedAI's best score before the first dendrite is the lowest"
            if arch[0] == max(before):
                return "maximizing", "inferred: PerforatedAI's best score before the first dendrite is the highest"
    if len(series) >= 2 and series[0][1] != series[-1][1]:
        fell = series[-1][1] < series[0][1]
        return (("minimizing" if fell else "maximizing"),
                f"guessed: the score {'fell' if fell else 'rose'} from {series[0][1]:.4g} to {series[-1][1]:.4g}")
    return None, "unknown: no maximizing_score in the config and too few scores to tell"


def better(direction: str, a: float, b: float) -> bool:
    return a > b if direction == "maximizing" else a < b


def best_of(series: list[tuple[int, float]], direction: str) -> tuple[int, float] | None:
    best = None
    for epoch, score in series:
        if best is None or better(direction, score, best[1]):
            best = (epoch, score)
    return best


def best_so_far(series: list[tuple[int, float]], direction: str | None) -> list[tuple[int, float]]:
    """(epoch, the best score up to it); the raw scores when the direction is unknown."""
    if direction is None:
        return list(series)
    out: list[tuple[int, float]] = []
    for epoch, score in series:
        out.append((epoch, score if not out or better(direction, score, out[-1][1]) else out[-1][1]))
    return out


def scores(text: str | None, source: str, *, maximizing: object = None, config_name: str = "the config",
           arch_text: str | None = None, first_switch: int | None = None) -> Scores:
    """The best validation score so far and its trend over the last TREND_WINDOW epochs."""
    series = score_series(text or "")
    result = Scores(source=source if series else "", epochs=series, last=series[-1][1] if series else None)
    if not series:
        return result
    result.direction, result.direction_how = infer_direction(series, maximizing, config_name, arch_text, first_switch)
    if result.direction is None:
        return result
    result.best_epoch, result.best = best_of(series, result.direction)  # type: ignore[misc]
    window = min(TREND_WINDOW, len(series) - 1)
    if window < 1:
        return result
    before = best_of(series[:-window], result.direction)
    if before is not None and better(result.direction, result.best, before[1]):
        result.trend = "improving"
        result.trend_detail = f"{before[1]:.4g} -> {result.best:.4g} over the last {window} epoch(s)"
    else:
        result.trend = "stalled"
        result.trend_detail = f"no new best in the last {window} epoch(s)"
    return result


def kept_sizes(counts: list[int]) -> list[int]:
    """The model's sizes from the first through each dendrite addition it kept: param_counts.csv gets a row at every
    switch, a larger size when dendrites are added and a smaller one when PerforatedAI rejects them (it reloads the
    best model from before them), so a shrink takes back the additions it undoes."""
    kept: list[int] = []
    for count in counts:
        if not kept or count > kept[-1]:
            kept.append(count)
        else:
            while len(kept) > 1 and kept[-1] > count:
                kept.pop()
    return kept


def dendrites(param_counts_text: str | None, switch_epochs_text: str | None, switch_numbers: list[int], *,
              param_counts_name: str = "param_counts.csv", switch_epochs_name: str = "switch_epochs.csv",
              max_dendrites: object = None) -> Dendrites:
    """Dendrites added so far, the one count the log, `pai-launch status`, the metrics and systemd's STATUS= show: from
    the model's growth in param_counts.csv (rejected additions taken back), else switch_epochs.csv (two switches per
    dendrite), else the newest switch_N.pt (N = switches so far); None when none of them says."""
    result = Dendrites(max_dendrites=max_dendrites if isinstance(max_dendrites, int) else None)
    epochs = switch_epochs(switch_epochs_text or "")
    result.epochs = epochs[1::2]
    counts = [c for c in (_int(row[1]) for row in rows(param_counts_text or "") if len(row) >= 2) if c is not None]
    growth = kept_sizes(counts)
    if growth:
        result.count, result.source, result.param_counts = len(growth) - 1, param_counts_name, growth
    elif epochs:
        result.count, result.source = len(epochs) // 2, switch_epochs_name
    elif switch_numbers:
        result.count, result.source = max(switch_numbers) // 2, f"switch_{max(switch_numbers)}.pt"
    return result


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
