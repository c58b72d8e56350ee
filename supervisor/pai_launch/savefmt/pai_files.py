"""What PerforatedAI's own files in a save folder say: validation scores and dendrites added, read once into one
value that the live supervisor (its status line, metrics, systemd STATUS=) and `pai-launch status` share.

Pure readers (file contents in, values out), plus `dendrites_and_best`, which reads the folder itself without ever
blocking on a pipe or following a link. PerforatedAI writes these files non-atomically, so a row that does not parse
is skipped rather than trusted.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pai_launch.savefmt import safeopen, savedir

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
        return ("maximizing" if maximizing
                else "minimizing"), f"{config_name} says maximizing_score {str(maximizing).lower()}"
    if arch_text and first_switch is not None:  # PerforatedAI's best score of the first architecture is its min or its
        # max
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
              limit: tuple[int | None, str] = (None, "")) -> Dendrites:
    """Dendrites added so far, the one count the log, `pai-launch status`, the metrics and systemd's STATUS= show: from
    the model's growth in param_counts.csv (rejected additions taken back), else switch_epochs.csv (two switches per
    dendrite), else the newest switch_N.pt (N = switches so far); None when none of them says."""
    result = Dendrites(max_dendrites=limit[0], max_from=limit[1])
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

@dataclass
class Dendrites:
    count: int | None = None
    source: str = ""  # the file it was read from
    param_counts: list[int] = field(default_factory=list)  # the model's size before and after each addition
    epochs: list[int] = field(default_factory=list)  # the epoch at which each dendrite was added
    max_dendrites: int | None = None  # dendrite_limit's
    max_from: str = ""


@dataclass
class Scores:
    source: str = ""
    epochs: list[tuple[int, float]] = field(default_factory=list)  # (epoch, validation score)
    direction: str | None = None  # "maximizing" | "minimizing" | None (unknown)
    direction_how: str = ""
    best: float | None = None
    best_epoch: int | None = None
    last: float | None = None
    trend: str = ""  # "improving" | "stalled" | "" (fewer than 2 epochs or direction unknown)
    trend_detail: str = ""


def listing(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except FileNotFoundError:
        return []


#: The most of one of the folder's files that status reads (a week's events file is a few MB).
_MAX_READ = 1 << 30


def read_text(path: Path, notes: list[str]) -> str | None:
    """The file's text; a pipe or link in its place is noted, never opened to block on or followed."""
    try:
        return safeopen.read_bytes(path, _MAX_READ).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        notes.append(f"cannot read {path.name}: {exc.strerror or exc}")
        return None


#: Dendrites PerforatedAI's dendrite capacity test adds before it stops (its default mode: perforate_model then sets
#: max_dendrites to 1000, a switch every epoch, and writes no <save>_config.json).
CAPACITY_TEST_DENDRITES = 3
CAPACITY_TEST = ("PerforatedAI's dendrite capacity test, which adds 3 (it was on when perforate_model ran: no "
                 "<save>_config.json was written, and the library then allows 1000 dendrites and switches every epoch)")


def dendrite_limit(names: list[str], config_text: str | None) -> tuple[int | None, str]:
    """(the most dendrites the script's settings allow, where that comes from) from the folder's listing and its
    <save>_config.json: its `max_dendrites`; or, where PerforatedAI trained (best_model.pt) but wrote no config, the
    capacity test's 3; (None, "") when neither says."""
    value = config_facts(config_text).get("max_dendrites")
    if isinstance(value, int) and not isinstance(value, bool):
        return value, "max_dendrites in <save>_config.json"
    if config_text is None and "best_model.pt" in names and not any(n.endswith("_config.json") for n in names):
        return CAPACITY_TEST_DENDRITES, CAPACITY_TEST
    return None, ""


def folder_limit(save: Path) -> tuple[int | None, str]:
    """dendrite_limit for the save folder `save`, read from it."""
    names = listing(save)
    name = f"{prefix(names, save.name)}_config.json"
    return dendrite_limit(names, read_text(save / name, []) if name in names else None)


def dendrites_and_best(save: Path) -> tuple[int | None, float | None]:
    """(dendrites added, best validation score so far) from PerforatedAI's files alone: what a running pai-launch's
    live status line shows, read the same way as `gather` reads them, without the rest."""
    names = listing(save)
    notes: list[str] = []
    pre = prefix(names, save.name)
    read = {key: read_text(save / f"{pre}{key}", notes) if f"{pre}{key}" in names else None
            for key in ("_config.json", "Scores.csv", "param_counts.csv", "switch_epochs.csv", "_best_arch_scores.csv")}
    config = config_facts(read["_config.json"])
    epochs = switch_epochs(read["switch_epochs.csv"] or "")
    numbers = sorted(n for n in (savedir.switch_number(name) for name in savedir.snapshot_switches(save))
                     if n is not None)
    found = dendrites(read["param_counts.csv"], read["switch_epochs.csv"], numbers, param_counts_name="",
                      switch_epochs_name="", limit=dendrite_limit(names, read["_config.json"]))
    best = scores(read["Scores.csv"], "", maximizing=config.get("maximizing_score"), config_name="",
                  arch_text=read["_best_arch_scores.csv"], first_switch=epochs[0] if epochs else None)
    return found.count, best.best


def folder_facts(save: Path) -> tuple[int, float | None]:
    """(dendrites added, best validation score so far or None), never raising: the one count the supervisor's log,
    metrics, live line and systemd's STATUS= show, read while PerforatedAI may be writing (a half-written CSV must not
    break the line)."""
    try:
        count, best = dendrites_and_best(save)
    except Exception:  # noqa: BLE001 - see above
        count, best = None, None
    return (0 if count is None else count), best
