"""Prometheus metrics of a run (--metrics-port), for collectors: fed by pai-launch's own log events.

A structlog processor, like the events file: every event the run logs passes through `observe`, which keeps the
metrics up to date, so the metrics and the log cannot disagree. prometheus_client is imported only when metrics
are asked for, and its server runs on a daemon thread of the supervisor (it starts no process).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pai_launch.wire import log_events
from pai_launch.savefmt import savedir

#: Seconds from a generation's end to the next one's workers training (backoff and worker start-up included).
GAP_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
#: A generation lasts from seconds (a toy) to a day.
DURATION_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600)
ENDS = ("generation_ended", "generation_failed", "generation_stopped")


class RunMetrics:
    """The run's metrics in their own registry; `save_dir()` says where the save folder is now (it may be adopted)."""

    def __init__(self, save_dir: Callable[[], Path], clock: Callable[[], float] = time.monotonic) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

        self._save_dir, self._clock = save_dir, clock
        self.registry = registry = CollectorRegistry()
        self.info = Info("pai_launch_run", "The run: id, script, save folder", registry=registry)
        self.generation = Gauge("pai_launch_generation", "The current (or last) generation; 0 is the init run",
                                registry=registry)
        self.dendrites = Gauge("pai_launch_dendrites", "Dendrites added so far (as pai-launch status counts them)",
                               registry=registry)
        self.best = Gauge("pai_launch_best_score", "The best validation score so far (NaN until PerforatedAI's "
                          "Scores.csv has one)", registry=registry)
        self.failures = Counter("pai_launch_generation_failures", "Generations that failed", registry=registry)
        self.restarts = Counter("pai_launch_restarts", "Generations started after another one ended", registry=registry)
        self.consecutive = Gauge("pai_launch_consecutive_failures", "Failed generations in a row without progress",
                                 registry=registry)
        self.gap = Histogram("pai_launch_restart_gap_seconds",
                             "From a generation's end to the next one's workers training (their first write)",
                             buckets=GAP_BUCKETS, registry=registry)
        self.duration = Histogram("pai_launch_generation_duration_seconds", "How long each generation ran",
                                  buckets=DURATION_BUCKETS, registry=registry)
        self.exit_code = Gauge("pai_launch_last_worker_exit_code",
                               "Each rank's exit code in the last generation that ended (-N: killed by signal N)",
                               ["rank"], registry=registry)
        self.complete = Gauge("pai_launch_training_complete", "1 once SAVE/.training_complete is there",
                              registry=registry)
        self.running = Gauge("pai_launch_generation_running", "1 while a generation's workers run", registry=registry)
        self._ended_at: float | None = None
        self._nproc = 0
        self._server = None
        self.url: str | None = None

    # --- the processor ---------------------------------------------------------------------------------
    def __call__(self, logger: Any, method_name: str, event_dict: dict) -> dict:
        try:
            self.observe(event_dict)
        except Exception:  # noqa: BLE001 - metrics must never fail the run's logging
            pass
        return event_dict

    def observe(self, event: dict) -> None:
        name = event.get("event")
        if name == log_events.RUN_STARTED:
            self.info.info({"run_id": str(event.get("run_id", "")), "script": str(event.get("script", "")),
                            "save_folder": str(event.get("save_folder", ""))})
            self.generation.set(event.get("generation") or 0)
            self.consecutive.set(event.get("failures") or 0)
            self._refresh_folder()
        elif name == log_events.INIT_STARTED:
            self.generation.set(0)
        elif name == log_events.GENERATION_STARTED:
            self.generation.set(event["generation"])
            self._nproc = int(event.get("nproc") or 0)
            if self._ended_at is not None:
                self.restarts.inc()
            self.running.set(1)
        elif name == log_events.TRAINING_REACHED:
            if self._ended_at is not None:
                self.gap.observe(max(0.0, self._clock() - self._ended_at))
                self._ended_at = None
        elif name in ENDS:
            self._generation_end(name, event)
        elif name == log_events.RETRY_SCHEDULED:
            self.consecutive.set(event.get("failures") or 0)
        elif name in (log_events.COMPLETION_MARKER_SEEN, log_events.RUN_FINISHED, log_events.ALREADY_COMPLETE):
            self._refresh_folder()
            if name == log_events.RUN_FINISHED:
                self.running.set(0)

    def _generation_end(self, name: str, event: dict) -> None:
        self._ended_at = self._clock()
        self.running.set(0)
        if event.get("duration_s") is not None:
            self.duration.observe(float(event["duration_s"]))
        if name == log_events.GENERATION_FAILED:
            self.failures.inc()
        elif name == log_events.GENERATION_ENDED and (event.get("switch_files") or event.get("complete")):
            self.consecutive.set(0)  # progress resets the count
        codes = {str(rank): code for rank, code in (event.get("exit_codes") or {}).items()}
        if name == log_events.GENERATION_ENDED:
            codes = {str(rank): 0 for rank in range(self._nproc)}
        if codes:
            self.exit_code.clear()
            for rank, code in codes.items():
                self.exit_code.labels(rank=rank).set(code)
        self._refresh_folder()

    def _refresh_folder(self) -> None:
        from pai_launch.supervise.runviews import folder_facts

        folder = self._save_dir()
        dendrites, best = folder_facts(folder)
        self.dendrites.set(dendrites)
        self.best.set(float("nan") if best is None else best)
        self.complete.set(1 if savedir.marker_mtime(folder) is not None else 0)

    # --- serving ---------------------------------------------------------------------------------------
    def serve(self, host: str, port: int) -> str:
        """Start the HTTP server (a daemon thread); returns its URL (port 0: the port it got)."""
        from prometheus_client import start_http_server

        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        bound = self._server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound}/metrics"
        return self.url

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
