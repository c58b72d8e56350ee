"""The job's store process (node 0), and the process every other node keeps connected to it.

serve: torch's TCPStore, served at --rdzv-endpoint for the whole run (listening on the endpoint's address only,
see listen.py), so every generation's c10d rendezvous and the nodes' agreement live in a store that outlives
each generation's agents. Its first stdin line is the job's secret (jobsecret.py), under which it keeps the
job's facts (run id, rendezvous id, fingerprint); it says Serving, publishes the secret's digest once node 0
wrote the secret file in the save folder, then takes SetValue lines on stdin. At EOF it marks itself closing
and lingers briefly, for the other nodes to see a stop flag and the close, and exits. Every line either way is a
typed message (wire.storepipe).

probe: connect within --rdzv-timeout, read the job's secret from the shared save folder, refuse to start (exit
2, Refused) when the command differs from node 0's or node 0's secret file is not visible here (the save folder
is not shared); say JobJoined (node 0's facts and the secret). Then watch: check the store every WATCH_INTERVAL
and say StoreGone and exit 3 the moment it is gone without having said it closes (node 0 killed, its store
killed, its machine gone); exit 0 at stdin's EOF or once the store closes (StoreClosed, or StopCarried).

Run as: python -m pai_launch.store.server serve|probe ...
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import time

from pai_launch.linux import listen, procs
from pai_launch.store.client import connect
from pai_launch.wire import codec, crossnode, jobsecret, storelink, storevalues
from pai_launch.wire.storepipe import (
    TO_STORE,
    JobJoined,
    Refused,
    Secret,
    Serving,
    SetValue,
    StopCarried,
    StoreClosed,
    StoreGone,
)

#: How long node 0's store stays up, at most, after its pai-launch is done, for the other nodes to see a stop (one
#: between generations sees it when it starts its next agent, after its backoff) and the close.
LINGER = 10.0
PROBE_FAILED = 2
#: The watch's verdict: the store went away without closing.
STORE_LOST = 3
#: How often the other nodes' watch checks the store, and how long one check may take (a machine gone without a
#: reset answers nothing): the store's loss is seen within WATCH_INTERVAL + WATCH_TIMEOUT.
WATCH_INTERVAL = 0.5
WATCH_TIMEOUT = 5.0


def serve(port: int, facts: storevalues.JobFacts, host: str) -> int:
    from datetime import timedelta

    first = sys.stdin.readline()
    secret = TO_STORE.decode(first, expect=Secret).secret if first.strip() else ""
    if not secret:
        _say(Refused("the job's store was started without the job's secret"))
        return PROBE_FAILED
    try:
        sock = listen.bound_socket(host, port)
    except OSError as exc:
        _say(Refused(f"cannot serve the job's store at {host}:{port}: {listen.bind_problem(exc, host, port)}"))
        return PROBE_FAILED
    try:
        store, backend = _store_on(sock, port, timedelta(seconds=30))
    except Exception as exc:  # noqa: BLE001 - torch's DistNetworkError/RuntimeError
        _say(Refused(f"cannot serve the job's store at {host}:{port}: {crossnode.one_line(exc)}: choose a free port in "
                     "--rdzv-endpoint (or stop what listens there)"))
        return PROBE_FAILED
    link = storelink.StoreLink(store, 0, secret)
    link.put(crossnode.INFO, storevalues.StoreInfo())
    link.put(crossnode.FACTS, facts)
    _say(Serving(backend))
    for line in sys.stdin:
        if line.strip():
            command = TO_STORE.decode(line, expect=SetValue)
            link.set(command.key, command.value)
    link.set(crossnode.CLOSING, "1")
    deadline = time.monotonic() + LINGER
    while time.monotonic() < deadline and _others_pending(link, facts.max_nodes):
        time.sleep(0.05)
    return 0


def _store_on(sock, port: int, timeout):
    """torch's TCPStore served on the bound `sock`, and which server: libuv's (one event loop for thousands of
    connections) where this torch serves an inherited socket with it, else the older one (one thread polling every
    connection), which torch before 2.8 needs for that. Tried, not looked up by version; torch's complaint about
    the first try goes to this process's stderr, which nobody reads once it serves."""
    from torch.distributed import TCPStore

    host = listen.client_host(sock)
    try:
        return TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=timeout,
                        master_listen_fd=sock.fileno(), use_libuv=True), "libuv"
    except (NotImplementedError, TypeError):
        return TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=timeout,
                        master_listen_fd=sock.fileno(), use_libuv=False), "legacy"


def _others_pending(link: storelink.StoreLink, max_nodes: int) -> bool:
    """Some other node has not yet seen the stop flag (if one is raised) or the close."""
    others = range(1, max_nodes)
    if link.get(crossnode.STOP) is not None:
        registered = sum(1 for node in others if link.get(crossnode.node_key(node)) is not None)
        if link.add(crossnode.STOP_SEEN, 0) < registered:
            return True
    return any(link.get(crossnode.watch_key(node)) is not None for node in others)


def probe(host: str, port: int, timeout: float, node: int, fingerprint: dict, save_dir: str, settle: float) -> int:
    deadline = time.monotonic() + timeout
    try:
        store = connect(host, port, timeout)
        public = storelink.StoreLink(store, node, "")
        public_info = _store_info(public)
        # Node 0's store publishes the secret's digest once node 0 holds the save folder and wrote the secret: wait.
        while (public_info is None or not public_info.digest) and time.monotonic() < deadline:
            time.sleep(0.1)
            public_info = _store_info(public)
    except Exception as exc:  # noqa: BLE001 - torch's connect timeout, or the store went away
        _say(Refused(f"cannot reach the job's store at {host}:{port} within {timeout:g} s ({crossnode.one_line(exc)}): "
                     "start node 0 "
                     "first and check --rdzv-endpoint (node 0's address and port, the same on every node) and the "
                     "network"))
        return PROBE_FAILED
    if public_info is None:
        _say(Refused(f"{host}:{port} is not a pai-launch job's store (of this version): check --rdzv-endpoint and that "
                     "every node runs the same pai-launch"))
        return PROBE_FAILED
    if not public_info.digest:
        _say(Refused(f"node 0 at {host}:{port} did not take the save folder within {timeout:g} s: see node 0's log"))
        return PROBE_FAILED
    secret = _wait_secret(save_dir, public_info.digest, settle)
    if secret is None:
        _say(Refused(f"node 0 wrote {os.path.join(save_dir, jobsecret.SECRET_FILE)}, but this node does not see it "
                     "after "
                     f"{settle:g} s: the save folder must be on a file system every node shares (and --save-name the "
                     "same path on "
                     "every node)"))
        return PROBE_FAILED
    link = storelink.StoreLink(store, node, secret)
    try:
        facts = link.read(crossnode.FACTS)
    except storelink.StoreLost as exc:
        _say(Refused(f"the job's store at {host}:{port} went away: {exc}"))
        return PROBE_FAILED
    if facts is None:
        _say(Refused(f"{host}:{port} holds no facts under the job's secret: node 0 was restarted meanwhile; start this "
                     "node "
                     "again"))
        return PROBE_FAILED
    theirs, ours = facts.fingerprint, fingerprint
    differences = [f"{key} {ours.get(key)!r} here, {theirs.get(key)!r} on node 0"
                   for key in sorted(set(theirs) | set(ours))
                   if theirs.get(key) != ours.get(key)]
    if differences:
        _say(Refused("this node's command differs from node 0's (" + "; ".join(differences) + "): start every node "
                     "with "
                     "the same script, arguments, --nproc, --nnodes and --restructure"))
        return PROBE_FAILED
    try:
        link.set(crossnode.node_key(node), socket.gethostname())
        link.set(crossnode.watch_key(node), "1")
    except storelink.StoreLost as exc:
        _say(Refused(f"the job's store at {host}:{port} went away: {exc}"))
        return PROBE_FAILED
    _say(JobJoined(facts, secret))
    return watch(store, link, node)


def _say(message) -> None:
    """One FROM_STORE line on stdout, for this node's pai-launch (coordination)."""
    print(codec.encode_text(message), flush=True)


def _store_info(public: storelink.StoreLink) -> storevalues.StoreInfo | None:
    """The store's public info; None where there is none, or it is not a pai-launch store's (of this version)."""
    try:
        return public.read(crossnode.INFO)
    except codec.WireError:
        return None


def _wait_secret(save_dir: str, digest: str, settle: float) -> str | None:
    """The secret node 0 wrote, once this node sees it (a shared file system may show it late)."""
    deadline = time.monotonic() + settle
    while True:
        secret = jobsecret.read(save_dir, digest)
        if secret is not None or time.monotonic() >= deadline:
            return secret
        time.sleep(0.2)


def watch(store, link: storelink.StoreLink, node: int) -> int:
    """Until stdin's EOF (this node's pai-launch is done): a store gone without closing is reported at once."""
    from datetime import timedelta

    store.set_timeout(timedelta(seconds=WATCH_TIMEOUT))
    while True:
        readable, _, _ = select.select([sys.stdin], [], [], WATCH_INTERVAL)
        try:
            if readable and not sys.stdin.readline():
                link.delete(crossnode.watch_key(node))
                return 0
            if link.get(crossnode.CLOSING) is not None:
                stop = link.get(crossnode.STOP)
                if stop is not None and link.get(crossnode.stop_seen_key(node)) is None:
                    # This node's agent never saw it (it was starting, or between generations): carry it, and let
                    # node 0's store go, which lingers until every node has seen the flag.
                    link.set(crossnode.stop_seen_key(node), "1")
                    link.add(crossnode.STOP_SEEN, 1)
                    _say(StopCarried(storevalues.STORE.decode(stop, expect=storevalues.StopFlag)))
                else:
                    _say(StoreClosed())
                link.delete(crossnode.watch_key(node))
                return 0
        except storelink.StoreLost as exc:
            _say(StoreGone(crossnode.one_line(exc.__cause__ or exc)))
            return STORE_LOST


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pai_launch.store.server")
    sub = parser.add_subparsers(dest="mode", required=True)
    serving = sub.add_parser("serve")
    serving.add_argument("--host", required=True)
    serving.add_argument("--port", type=int, required=True)
    serving.add_argument("--facts", required=True, help="the job's JobFacts, encoded")
    probing = sub.add_parser("probe")
    probing.add_argument("--host", required=True)
    probing.add_argument("--port", type=int, required=True)
    probing.add_argument("--timeout", type=float, required=True)
    probing.add_argument("--node", type=int, required=True)
    probing.add_argument("--fingerprint", required=True)
    probing.add_argument("--save-dir", required=True)
    probing.add_argument("--settle", type=float, required=True)
    options = parser.parse_args(argv)
    procs.set_parent_death_signal(9)
    # Slurm signals every process of a job step (USR1 before a time limit, TERM on scancel): the store must stay up
    # until node 0's pai-launch closes it, so that the other nodes learn how the job ends. It dies with its parent.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, signal.SIG_IGN)
    if options.mode == "serve":
        code = serve(options.port, storevalues.STORE.decode(options.facts, expect=storevalues.JobFacts), options.host)
    else:
        code = probe(options.host, options.port, options.timeout, options.node, json.loads(options.fingerprint),
                     options.save_dir, options.settle)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
