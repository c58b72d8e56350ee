"""`pai-launch status [SAVE] [--json] [--watch] [--timeline FILE.png]`: where a run stands, from its save folder alone.

gather() reads the folder's own files (pai-launch's .pai-launch/events.jsonl, state.json and lock files, and
PerforatedAI's CSVs, switch files and completion marker), and looks, read-only, whether a pai-launch holds the
folder now. The parsing and summarising are pure (status.events, savefmt.pai_files, status.summary); this module only
reads files. Nothing here imports torch, and nothing is written into the save folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from pai_launch.savefmt import adoptions, savedir
from pai_launch.savefmt.pai_files import (
    config_facts,
    dendrite_limit,
    dendrites,
    listing,
    prefix,
    read_text,
    scores,
    switch_epochs,
)
from pai_launch.savefmt.record import EVENTS_FILE, STATE_DIR, STATE_FILE
from pai_launch.status.events import history, parse_lines
from pai_launch.status.live import supervisors
from pai_launch.status.model import RunStatus, StatusError
from pai_launch.status.pai import inferred_run
from pai_launch.status.render import render_json, render_text
from pai_launch.status.summary import Facts, summarise
from pai_launch.status.timeline import draw_timeline

__all__ = ["RunStatus", "StatusError", "draw_timeline", "gather", "main", "render_json", "render_text"]

#: Files that make a folder PerforatedAI's save folder even without pai-launch's own.
_PAI_SIGNS = (savedir.INIT_OUTPUT, savedir.MARKER, "latest.pt", "best_model.pt")
_CLEAR = "\x1b[H\x1b[2J"


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _check_folder(save: Path, names: list[str]) -> None:
    if not save.exists():
        raise StatusError(f"{save}: no such folder: give the save folder (pai-launch's --save-name, PAI by default)")
    if not save.is_dir():
        raise StatusError(f"{save} is not a folder: give the save folder (pai-launch's --save-name, PAI by default)")
    if not os.access(save, os.R_OK | os.X_OK):
        raise StatusError(f"{save} cannot be read: check its permissions")
    pai = any(n in _PAI_SIGNS or savedir.switch_number(n) is not None or n.endswith(("Scores.csv", "_config.json"))
              for n in names)
    if STATE_DIR not in names and not pai:
        raise StatusError(f"{save} is not a save folder: no .pai-launch/ and no PerforatedAI files (array_dims.csv, "
                          "switch_N.pt, <save>Scores.csv): give the folder the training script saves into")


def _record(save: Path, notes: list[str]) -> dict | None:
    text = read_text(save / STATE_DIR / STATE_FILE, notes)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        notes.append(f"{STATE_DIR}/{STATE_FILE} is not valid JSON (being rewritten, or damaged)")
        return None
    return data if isinstance(data, dict) else None


def gather(save: Path) -> RunStatus:
    """The status of the run in `save`, from the folder's own files; StatusError when it is not a save folder."""
    save = Path(save).absolute()
    names = listing(save) if save.is_dir() else []
    _check_folder(save, names)
    notes: list[str] = []
    state_names = listing(save / STATE_DIR)
    events_text = read_text(save / STATE_DIR / EVENTS_FILE, notes) if EVENTS_FILE in state_names else None
    pre = prefix(names, save.name)
    read = {key: read_text(save / f"{pre}{key}", notes) if f"{pre}{key}" in names else None
            for key in ("_config.json", "Scores.csv", "param_counts.csv", "switch_epochs.csv", "_best_arch_scores.csv")}
    config = config_facts(read["_config.json"])
    epochs = switch_epochs(read["switch_epochs.csv"] or "")
    switches = {savedir.switch_number(name): stamp[0] / 1e9 for name, stamp in savedir.snapshot_switches(save).items()}
    facts = Facts(
        save=str(save), now=time.time(),
        history=history(parse_lines(events_text)) if events_text is not None else None,
        record=_record(save, notes) if STATE_FILE in state_names else None,
        supervisors=supervisors(save, state_names),
        dendrites=dendrites(read["param_counts.csv"], read["switch_epochs.csv"],
                            sorted(n for n in switches if n is not None),
                            param_counts_name=f"{pre}param_counts.csv", switch_epochs_name=f"{pre}switch_epochs.csv",
                            limit=dendrite_limit(names, read["_config.json"])),
        scores=scores(read["Scores.csv"], f"{pre}Scores.csv", maximizing=config.get("maximizing_score"),
                      config_name=f"{pre}_config.json", arch_text=read["_best_arch_scores.csv"],
                      first_switch=epochs[0] if epochs else None),
        marker_time=savedir.marker_mtime(save), latest_time=_mtime(save / "latest.pt"), notes=notes)
    facts.inferred_init, facts.inferred_generations = inferred_run(
        {n: t for n, t in switches.items() if n is not None}, _mtime(save / savedir.INIT_OUTPUT), facts.marker_time,
        facts.latest_time)
    return summarise(facts)


def default_folder(workdir: Path) -> Path:
    """SAVE when none is given: ./PAI, unless the script wrote nothing there (it is absent, or holds only a stray
    .pai-launch/ of an older pai-launch) and pai-launch adopted a folder here: then the one adopted last. An unreadable
    record of adoptions is said on stderr and ./PAI is read."""
    default = workdir / "PAI"
    if default.is_dir() and [name for name in listing(default) if name != STATE_DIR]:
        return default
    try:
        adopted = adoptions.newest(workdir)
    except adoptions.AdoptionRecordError as exc:
        print(f"pai-launch: warning: {exc}", file=sys.stderr)
        return default
    return workdir / adopted.save_name if adopted is not None else default


def main(save: Path, *, as_json: bool, watch: bool, timeline: Path | None, interval: float = 2.0,
         out: TextIO = sys.stdout) -> int:
    """Show the status once, or with `watch` every `interval` seconds until the run is no longer running (that last
    frame shown) or Ctrl-C. 0, or 2 with one line on stderr when SAVE is not a save folder or the picture fails."""
    tty = hasattr(out, "isatty") and out.isatty()
    stopped = threading.Event()
    with _stop_on_ctrl_c(stopped) if watch else contextlib.nullcontext():
        return _frames(save, as_json=as_json, watch=watch, timeline=timeline, interval=interval, out=out, tty=tty,
                       stopped=stopped)


def _frames(save: Path, *, as_json: bool, watch: bool, timeline: Path | None, interval: float, out: TextIO, tty: bool,
            stopped: threading.Event) -> int:
    frames = 0
    try:
        while not stopped.is_set():
            status = gather(Path(save))
            if as_json:
                frame = render_json(status, indent=None if watch else 2) + "\n"
            else:
                frame = (_CLEAR if watch and tty else "\n" if frames else "") + render_text(status)
            out.write(frame)
            out.flush()
            frames += 1
            if timeline is not None:
                draw_timeline(status, Path(timeline))
            if not watch or status.state != "running":
                if timeline is not None:
                    print(f"pai-launch: timeline written to {timeline}", file=sys.stderr)
                return 0
            stopped.wait(interval)
        return 0
    except StatusError as exc:
        print(f"pai-launch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


@contextlib.contextmanager
def _stop_on_ctrl_c(stopped: threading.Event):
    """--watch ends at the next frame's turn on Ctrl-C (or SIGTERM): the handler only sets `stopped`, so the signal
    never lands as an exception in the middle of a frame's write or a read of the folder (a write to a full pipe then
    finishes, and nothing is left half-done at exit). The handlers before are put back after; in a thread other than
    the main one, Ctrl-C stays as it was."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.signal(signum, lambda *_: stopped.set()) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
