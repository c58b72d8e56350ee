#!/usr/bin/env python3
"""How many requests a second one torch TCPStore serves (the job's store on node 0), for the cost model in
docs/scale.md: K client processes each send `check` (one request, one answer) as fast as they can for a few
seconds, against the libuv server and the older one. On this machine the clients share its cores with the server,
so the figures are a floor for a dedicated host.

Usage: .venv/bin/python -m scripts.bench_store [--clients 1,4,16] [--seconds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import time
from datetime import timedelta


def _client(port: int, seconds: float, counts) -> None:
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=30))
    store.set("k", "v")
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        store.check(["k"])
        done += 1
    counts.put(done)


def measure(libuv: bool, clients: int, seconds: float) -> float:
    from torch.distributed import TCPStore

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30),
                      use_libuv=libuv)
    spawn = multiprocessing.get_context("spawn")  # not fork: the server's threads live in this process
    counts = spawn.Queue()
    procs = [spawn.Process(target=_client, args=(port, seconds, counts)) for _ in range(clients)]
    for proc in procs:
        proc.start()
    total = sum(counts.get(timeout=seconds + 60) for _ in procs)
    for proc in procs:
        proc.join(30)
    del server
    return total / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--seconds", type=float, default=3.0)
    options = parser.parse_args()
    print(f"{'clients':>7} {'libuv req/s':>12} {'legacy req/s':>13}")
    for clients in (int(c) for c in options.clients.split(",")):
        print(f"{clients:>7} {measure(True, clients, options.seconds):>12.0f} "
              f"{measure(False, clients, options.seconds):>13.0f}", flush=True)


if __name__ == "__main__":
    main()
