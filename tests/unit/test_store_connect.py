"""Connecting to node 0's store within --rdzv-timeout: pai-launch waits for a listener itself (torch's client retries
past its own timeout), and connects once one is there."""

from __future__ import annotations

import socket
import threading

import pytest

from pai_launch.store.client import wait_listening

pytestmark = pytest.mark.timeout(30)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_nothing_listening_is_a_timeout_error_naming_the_address():
    port = _closed_port()
    with pytest.raises(TimeoutError, match=f"nothing accepted a connection at 127.0.0.1:{port}$"):
        wait_listening("127.0.0.1", port, 0.5)


def test_a_listener_that_comes_up_during_the_wait_is_found_with_time_left():
    port = _closed_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    started = threading.Event()

    def listen_soon():
        started.wait(5)
        server.bind(("127.0.0.1", port))
        server.listen()

    thread = threading.Thread(target=listen_soon)
    thread.start()
    started.set()
    try:
        left = wait_listening("127.0.0.1", port, 20.0)
        assert 1.0 <= left <= 20.0
    finally:
        thread.join()
        server.close()
