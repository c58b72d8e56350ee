"""Prometheus metrics of a run (--metrics-port), for collectors: fed by pai-launch's own log events.

A structlog processor, like the events file: every event the run logs passes through `observe`, which keeps the
metrics up to date, so the metrics and the log cannot disagree. The same port answers /healthz and /livez (judged by
core.health from what the metrics know, and the loop's turns). prometheus_client is imported only when metrics are
asked for, and the server runs on a daemon thread of the supervisor (it starts no process).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from pai_launch import __version__
from pai_launch.core import health
from pai_launch.savefmt import savedir
from pai_launch.savefmt.pai_files import folder_facts
from pai_launch.supervise.outputs import httpserve
from pai_launch.wire import log_events

#: Seconds from a generation's end to the next one's workers training (backoff and worker start-up included).
GAP_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
#: A generation lasts from seconds (a toy) to a day.
DURATION_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600)
ENDS = ("generation_ended", "generation_failed", "generation_stopped")
HEALTH_PATHS = {"/healthz": health.readiness, "/livez": health.liveness}


def installed_version(distribution: str) -> str:
    """A package's version from its metadata, without importing it (the supervisor never imports torch)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""


class RunMetrics:
    """The run's metrics in their own registry; `save_dir()` says where the save folder is now (it may be adopted).

    In a multi-node job (`node` given) every metric carries a `node` label, so one dashboard shows every node's
    pai-launch apart."""

    def __init__(self, save_dir: Callable[[], Path], clock: Callable[[], float] = time.monotonic, *,
                 node: int | None = None, max_failures: int = 3, wall: Callable[[], float] = time.time) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

        self._save_dir, self._clock = save_dir, clock
        self._node = {} if node is None else {"node": str(node)}
        self.registry = registry = CollectorRegistry()

        def made(kind, name: str, documentation: str, labels: tuple[str, ...] = (), **kwargs):
            family = kind(name, documentation, [*self._node, *labels], registry=registry, **kwargs)
            return family if labels or not self._node else family.labels(**self._node)

        self.info = made(Info, "pai_launch_run", "The run: id, script, save folder")
        self.build = made(Info, "pai_launch_build", "pai-launch's version, and the Python and torch it runs with")
        self.build.info({"version": __version__, "python": platform.python_version(),
                         "torch": installed_version("torch")})
        self.started = made(Gauge, "pai_launch_start_time_seconds", "When this pai-launch started (Unix time)")
        self.started_at = wall()
        self.started.set(self.started_at)
        self.progress = made(Gauge, "pai_launch_last_progress_timestamp_seconds",
                             "The save folder's last write (Unix time); the start time until there is one")
        self.progress.set_function(self._last_progress)
        self.budget = made(Gauge, "pai_launch_max_failures",
                           "--max-failures: failed generations in a row without progress before the run gives up")
        self.budget.set(max_failures)
        self.generation = made(Gauge, "pai_launch_generation", "The current (or last) generation; 0 is the init run")
        self.dendrites = made(Gauge, "pai_launch_dendrites", "Dendrites added so far (as pai-launch status counts "
                              "them)")
        self.past_maximum = made(Gauge, "pai_launch_dendrites_past_maximum",
                                 "1 once the model has more dendrites than the script's settings allow (a runaway)")
        self.best = made(Gauge, "pai_launch_best_score",
                         "The best validation score so far (NaN until PerforatedAI's Scores.csv has one)")
        self.failures = made(Counter, "pai_launch_generation_failures", "Generations that failed")
        self.restarts = made(Counter, "pai_launch_restarts", "Generations started after another one ended")
        self.consecutive = made(Gauge, "pai_launch_consecutive_failures", "Failed generations in a row without "
                                "progress")
        self.gap = made(Histogram, "pai_launch_restart_gap_seconds",
                        "From a generation's end to the next one's workers training (their first write)",
                        buckets=GAP_BUCKETS)
        self.in_process = made(Counter, "pai_launch_restructures_in_process",
                               "Restructures inside the running workers (--restructure in-process)")
        self.resume = made(Histogram, "pai_launch_in_process_resume_seconds",
                           "From an in-process restructure's switch file to its workers training again",
                           buckets=GAP_BUCKETS)
        self.duration = made(Histogram, "pai_launch_generation_duration_seconds", "How long each generation ran",
                             buckets=DURATION_BUCKETS)
        self.exit_code = made(Gauge, "pai_launch_last_worker_exit_code",
                              "Each rank's exit code in the last generation that ended (-N: killed by signal N)",
                              ("rank",))
        self.complete = made(Gauge, "pai_launch_training_complete", "1 once SAVE/.training_complete is there")
        self.running = made(Gauge, "pai_launch_generation_running", "1 while a generation's workers run")
        self.up = made(Gauge, "pai_launch_healthy", "1 while /healthz answers 200: the loop turns and the run is not "
                       "failing")
        self.up.set_function(lambda: float(self.verdict("/healthz").healthy))
        self.health = health.RunHealth()
        self._ended_at: float | None = None
        self._nproc = 0
        self._server = None
        self._metrics_app: Callable | None = None
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
            self._failures_in_a_row(event.get("failures") or 0)
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
        elif name == log_events.RESTRUCTURED_IN_PROCESS:
            self.in_process.inc()
            if isinstance(event.get("resumed_s"), (int, float)):
                self.resume.observe(max(0.0, float(event["resumed_s"])))
            self._failures_in_a_row(0)  # progress resets the count
            self._refresh_folder()
        elif name == log_events.RETRY_SCHEDULED:
            self._failures_in_a_row(event.get("failures") or 0)
        elif name == log_events.DENDRITES_PAST_MAXIMUM:
            self.past_maximum.set(1)
        elif name in (log_events.COMPLETION_MARKER_SEEN, log_events.RUN_FINISHED, log_events.ALREADY_COMPLETE):
            self._refresh_folder()
            if name == log_events.RUN_FINISHED:
                self.running.set(0)
                self._health(exit_code=event.get("exit_code"))

    def _generation_end(self, name: str, event: dict) -> None:
        self._ended_at = self._clock()
        self.running.set(0)
        if event.get("duration_s") is not None:
            self.duration.observe(float(event["duration_s"]))
        if name == log_events.GENERATION_FAILED:
            self.failures.inc()
        elif name == log_events.GENERATION_ENDED and (event.get("switch_files") or event.get("complete")):
            self._failures_in_a_row(0)  # progress resets the count
        codes = {str(rank): code for rank, code in (event.get("exit_codes") or {}).items()}
        if name == log_events.GENERATION_ENDED:
            codes = {str(rank): 0 for rank in range(self._nproc)}
        if codes:
            self.exit_code.clear()
            for rank, code in codes.items():
                self.exit_code.labels(rank=rank, **self._node).set(code)
        self._refresh_folder()

    def _failures_in_a_row(self, count: int) -> None:
        self.consecutive.set(count)
        self._health(consecutive_failures=count)

    def _refresh_folder(self) -> None:
        folder = self._save_dir()
        dendrites, best = folder_facts(folder)
        self.dendrites.set(dendrites)
        self.best.set(float("nan") if best is None else best)
        self.complete.set(1 if savedir.marker_mtime(folder) is not None else 0)

    def _last_progress(self) -> float:
        written = savedir.last_write(self._save_dir())
        return self.started_at if written is None else written

    # --- health ----------------------------------------------------------------------------------------
    def loop_turned(self, now: float) -> None:
        """The supervisor's loop came round (its housekeeping, every tick): what /livez reads."""
        self._health(loop_turned_at=now)

    def _health(self, **changes) -> None:
        self.health = replace(self.health, **changes)  # one value replaced whole: the server's threads read it

    def verdict(self, path: str) -> health.Verdict:
        return HEALTH_PATHS[path](self.health, self._clock())

    def app(self, environ: dict, start_response: Callable) -> list[bytes]:
        """The port's WSGI app: /healthz and /livez answered here, every other path is the metrics."""
        path = environ.get("PATH_INFO", "")
        if path not in HEALTH_PATHS:
            return self._metrics_app(environ, start_response)
        verdict = self.verdict(path)
        body = json.dumps({"healthy": verdict.healthy, "reason": verdict.reason,
                           "consecutive_failures": self.health.consecutive_failures,
                           "exit_code": self.health.exit_code}).encode() + b"\n"
        start_response("200 OK" if verdict.healthy else "503 Service Unavailable",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    # --- serving ---------------------------------------------------------------------------------------
    def serve(self, host: str, port: int) -> str:
        """Start the HTTP server (a daemon thread); returns the metrics' URL (port 0: the port it got)."""
        from prometheus_client import make_wsgi_app

        self._metrics_app = make_wsgi_app(self.registry)
        self._server, bound = httpserve.serve(self.app, host, port)
        self.url = httpserve.url_of(host, bound, "/metrics")
        return self.url

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
