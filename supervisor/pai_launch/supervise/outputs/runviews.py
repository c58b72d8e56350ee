"""What shows a run besides its log lines: Prometheus metrics (--metrics-port) and, on a terminal, the live status
line. Both are structlog processors fed by the run's own events; this module opens and closes them."""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from pai_launch.placement.spec import LaunchSpec
from pai_launch.savefmt.pai_files import folder_facts
from pai_launch.supervise.outputs import liveline, logs
from pai_launch.wire import log_events


def live_line_wanted(spec: LaunchSpec, err: TextIO | None = None) -> bool:
    """On a terminal with console logs only: services, Slurm, containers and JSON logs get plain lines."""
    err = err or sys.stderr
    return not logs.wants_json(spec.log_format, err) and err.isatty()


def loopback(host: str) -> bool:
    """An address only this machine reaches: localhost or a loopback address (0.0.0.0 and :: are every interface)."""
    if host.strip("[]").lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class RunViews:
    def __init__(self, spec: LaunchSpec, save_dir: Callable[[], Path], *, live: bool | None = None) -> None:
        self.spec = spec
        self.processors: list[Any] = []
        self.stream: TextIO | None = None
        self.metrics = None
        self.feed: liveline.StatusFeed | None = None
        #: The live status line, when there is one: the run's children write their output through it.
        self.line: liveline.LiveLine | None = None
        if spec.metrics_port is not None:
            from pai_launch.supervise.outputs.metrics import RunMetrics

            self.metrics = RunMetrics(save_dir, node=spec.nodes.node_rank if spec.nodes.multi else None,
                                      max_failures=spec.max_failures)
            self.processors.append(self.metrics)
        if live_line_wanted(spec) if live is None else live:
            self.line = liveline.open_live_line()
            self.feed = liveline.StatusFeed(self.line, lambda: folder_facts(save_dir()))
            self.processors.append(self.feed)
            self.stream = liveline.LineStream(self.line)

    def start(self, log) -> None:
        """Serve the metrics (the port was checked in preflight; one taken since is logged, and the run goes on)."""
        if self.metrics is None:
            return
        try:
            url = self.metrics.serve(self.spec.metrics_host, self.spec.metrics_port)
        except OSError as exc:
            log.error(log_events.METRICS_UNAVAILABLE, error=f"{self.spec.metrics_host}:{self.spec.metrics_port}: "
                      f"{exc.strerror or exc}",
                      hint="the run goes on without metrics; choose another --metrics-port next time")
            return
        log.info(log_events.METRICS_SERVING, url=url, health=url.removesuffix("/metrics") + "/healthz")
        if not loopback(self.spec.metrics_host):
            log.warning(log_events.METRICS_EXPOSED, host=self.spec.metrics_host,
                        hint="the metrics and health endpoints answer anyone who can reach this address, without "
                             "authentication (the run id, script path and save folder among them): use --metrics-host "
                             "127.0.0.1 and a proxy or tunnel, or a firewall")

    def loop_turned(self, now: float) -> None:
        """The supervisor's loop came round: /livez and /healthz judge from this."""
        if self.metrics is not None:
            self.metrics.loop_turned(now)

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.feed is not None:
            self.feed.close()
        if self.line is not None:
            self.line.close()
