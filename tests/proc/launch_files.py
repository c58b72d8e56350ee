"""Helpers for the tier-2 tests that look at what pai-launch keeps in the save folder: resumable folders with
switch files, SAVE/.pai-launch/state.json, events.jsonl and the quarantine, and waiting for logged events."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.helpers import Launch, events_file, safetensors_bytes, wait_until

STATE_DIR = ".pai-launch"


def make_resumable(save: Path, switches: dict[int, bytes] | None = None) -> Path:
    """A save folder as the init run and earlier generations leave it: array_dims.csv and switch files."""
    save.mkdir(parents=True, exist_ok=True)
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    for number, content in (switches if switches is not None else {2: safetensors_bytes(os.urandom(64))}).items():
        (save / f"switch_{number}.pt").write_bytes(content)
    return save


def state_dir(save: Path) -> Path:
    return save / STATE_DIR


def read_state(save: Path) -> dict[str, Any]:
    return json.loads((save / STATE_DIR / "state.json").read_text())


def read_events_file(save: Path, name: str | None = None) -> list[dict[str, Any]]:
    return events_file(save / STATE_DIR / "events.jsonl", name)


def quarantined(save: Path) -> dict[str, bytes]:
    """Quarantined file name -> its bytes."""
    folder = save / STATE_DIR / "quarantine"
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())} if folder.is_dir() else {}


def wait_event(launch: Launch, name: str, timeout: float, *, count: int = 1, where=None) -> dict[str, Any]:
    """Wait until pai-launch has logged `count` events called `name` (matching `where`); return the last."""

    def found():
        events = [e for e in launch.events(name) if where is None or where(e)]
        if len(events) >= count:
            return events[count - 1]
        if launch.popen.poll() is not None:  # it ended without: fail now, with its log
            raise AssertionError(f"pai-launch exited {launch.popen.returncode} before {count} {name} event(s):\n"
                                 f"{launch.log_summary()}")
        return None

    return wait_until(found, timeout, interval=0.02, message=f"{count} {name} event(s)")


def generations(launch: Launch) -> list[tuple[int, str | None]]:
    """(generation, load_folder) per generation_started event."""
    return [(event["generation"], event["load_folder"]) for event in launch.events("generation_started")]
