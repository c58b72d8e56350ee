"""The metrics port's HTTP server: one WSGI app on a daemon thread of the supervisor (it starts no process).

prometheus_client serves only its registry; the port also answers /healthz and /livez, so the app is ours and the
server is the standard library's, bound the way prometheus_client binds (the address family from the host, so an
IPv6 --metrics-host works) and silent (no access log on the run's console).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the name http.server calls
        """A scrape is no event of the run."""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    #: A slow scraper holds only its own thread, and no thread outlives the supervisor.
    daemon_threads = True


def serve(app: Callable, host: str, port: int) -> tuple[WSGIServer, int]:
    """Start serving `app` on host:port (0: any free port) from a daemon thread; returns the server and its port."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    server_class = type("_Server", (_ThreadingServer,), {"address_family": family})
    server = make_server(address[0], port, app, server_class=server_class, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="pai-launch-metrics", daemon=True).start()
    return server, server.server_address[1]


def url_of(host: str, port: int, path: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"
