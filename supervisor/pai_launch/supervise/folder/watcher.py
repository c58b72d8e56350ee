"""Watch the save folder with watchdog so switch files and the completion marker are seen as they land.

inotify by default; --poll uses watchdog's PollingObserver for network file systems where inotify
sees nothing. The handler only enqueues observations (SaveWritten, MarkerAppeared); the loop decides. With
--restructure in-process a second folder is watched: the records rank 0 leaves there (RestructureRecorded).
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from pai_launch.core.observations import MarkerAppeared, RestructureRecorded, SaveWritten, ThreadFailed
from pai_launch.savefmt import savedir

POLL_INTERVAL = 0.5


class _Handler(FileSystemEventHandler):
    def __init__(self, report: Callable[[object], None], *, records: bool = False) -> None:
        self._report = report
        self._records = records

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self._observe(event)
        except Exception as exc:  # watchdog's thread would die quietly: the loop must hear of it
            self._report(ThreadFailed("save-folder-watcher", f"{type(exc).__name__}: {exc}", traceback.format_exc()))

    def _observe(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in ("created", "modified", "moved", "closed"):
            return
        path = event.dest_path if event.event_type == "moved" else event.src_path
        name = os.path.basename(os.fsdecode(path))
        if self._records:
            if name.endswith(".json") and not name.startswith("."):  # not the temp file it is written in
                self._report(RestructureRecorded(os.fsdecode(path), time.monotonic()))
        elif savedir.is_marker(name):
            self._report(MarkerAppeared(time.monotonic()))
        else:
            self._report(SaveWritten(name, time.monotonic()))


class SaveFolderWatcher:
    def __init__(self, folder: Path, report: Callable[[object], None], *, poll: bool, records: Path
                 | None = None) -> None:
        self._observer = PollingObserver(timeout=POLL_INTERVAL) if poll else Observer()
        self._observer.schedule(_Handler(report), str(folder), recursive=False)
        if records is not None:
            self._observer.schedule(_Handler(report, records=True), str(records), recursive=False)
        self._observer.daemon = True

    def start(self) -> None:
        self._observer.start()

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=2)
