"""Watch the save folder with watchdog so switch files and the completion marker are seen as they land.

inotify by default; --poll uses watchdog's PollingObserver for network file systems where inotify
sees nothing. The handler only enqueues; the runner decides.
"""

from __future__ import annotations

import os
import queue
import time
from dataclasses import dataclass
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from pai_launch import savedir
from pai_launch.machine import MarkerAppeared

POLL_INTERVAL = 0.5


@dataclass(frozen=True)
class SaveWritten:
    """A file in the save folder was created or written to (it may still be mid-write)."""

    name: str
    now: float


class _Handler(FileSystemEventHandler):
    def __init__(self, inbox: queue.SimpleQueue) -> None:
        self._inbox = inbox

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in ("created", "modified", "moved", "closed"):
            return
        path = event.dest_path if event.event_type == "moved" else event.src_path
        name = os.path.basename(os.fsdecode(path))
        if savedir.is_marker(name):
            self._inbox.put(MarkerAppeared(time.monotonic()))
        else:
            self._inbox.put(SaveWritten(name, time.monotonic()))


class SaveFolderWatcher:
    def __init__(self, folder: Path, inbox: queue.SimpleQueue, *, poll: bool) -> None:
        self._observer = PollingObserver(timeout=POLL_INTERVAL) if poll else Observer()
        self._observer.schedule(_Handler(inbox), str(folder), recursive=False)
        self._observer.daemon = True

    def start(self) -> None:
        self._observer.start()

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=2)
