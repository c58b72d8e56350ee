"""The job's store process (node 0) and the check every other node runs against it before it starts.

serve: torch's TCPStore, served at --rdzv-endpoint's port for the whole run, so every generation's c10d
rendezvous and the nodes' agreement live in a store that outlives each generation's agents. It
publishes the job's facts (run id, rendezvous id, fingerprint, the token of a file node 0 wrote in
the save folder), prints "ready", then takes `{"set": [key, value]}` lines on stdin; at EOF it
lingers briefly so the other nodes can read a stop flag, and exits.

probe: connect within --rdzv-timeout, register this node, and refuse to start (exit 2, one line)
when the command differs from node 0's or node 0's file is not visible here (the save folder is
not shared). Prints the job's facts as JSON.

Run as: python -m pai_launch.jobstore serve|probe ...
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time

from pai_launch import crossnode, procs, savedir
from pai_launch.agent_store import connect

#: How long node 0's store stays up, at most, after its pai-launch is done, for the other nodes to see a stop (one
#: between generations sees it when it starts its next agent, after its backoff).
LINGER = 10.0
PROBE_FAILED = 2


def serve(port: int, info: dict) -> int:
    from datetime import timedelta

    from torch.distributed import TCPStore

    try:
        store = TCPStore("0.0.0.0", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError/DistNetworkError for a taken port
        print(f"error: cannot serve the job's store on port {port}: {str(exc).splitlines()[0]}: choose a free port in "
              "--rdzv-endpoint (or stop what listens there)", flush=True)
        return PROBE_FAILED
    store.set(crossnode.INFO, json.dumps(info))
    print("ready", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if "set" in command:
            key, value = command["set"]
            store.set(key, value)
    if store.check([crossnode.STOP]):
        deadline = time.monotonic() + LINGER
        while time.monotonic() < deadline and store.add(crossnode.STOP_SEEN, 0) < _other_nodes(store, info["max_nodes"]):
            time.sleep(0.05)
    return 0


def _other_nodes(store, max_nodes: int) -> int:
    return sum(1 for node in range(1, max_nodes) if store.check([crossnode.node_key(node)]))


def probe(host: str, port: int, timeout: float, node: int, fingerprint: dict, save_dir: str, settle: float) -> int:
    deadline = time.monotonic() + timeout
    try:
        store = crossnode.StoreLink(connect(host, port, timeout), node)
        info_text = store.get(crossnode.INFO)
        # Node 0's store publishes the job's facts a moment after it listens, and its token once node 0 holds the
        # save folder: wait for both.
        while (info_text is None or "token" not in json.loads(info_text)) and time.monotonic() < deadline:
            time.sleep(0.1)
            info_text = store.get(crossnode.INFO)
        if info_text is not None:
            store.set(crossnode.node_key(node), socket.gethostname())
    except Exception as exc:  # noqa: BLE001 - torch's connect timeout, or the store went away
        print(f"error: cannot reach the job's store at {host}:{port} within {timeout:g} s ({crossnode.one_line(exc)}): start node 0 "
              "first and check --rdzv-endpoint (node 0's address and port, the same on every node) and the network",
              flush=True)
        return PROBE_FAILED
    if info_text is None:
        print(f"error: {host}:{port} is not a pai-launch job's store: check --rdzv-endpoint", flush=True)
        return PROBE_FAILED
    info = json.loads(info_text)
    if "token" not in info:
        print(f"error: node 0 at {host}:{port} did not take the save folder within {timeout:g} s: see node 0's log", flush=True)
        return PROBE_FAILED
    theirs, ours = info["fingerprint"], fingerprint
    differences = [f"{key} {ours.get(key)!r} here, {theirs.get(key)!r} on node 0" for key in sorted(set(theirs) | set(ours))
                   if theirs.get(key) != ours.get(key)]
    if differences:
        print("error: this node's command differs from node 0's (" + "; ".join(differences) + "): start every node with "
              "the same script, arguments, --nproc and --nnodes", flush=True)
        return PROBE_FAILED
    token_file = os.path.join(save_dir, info["token_file"])
    if not savedir.wait_shown(token_file, settle, content=info["token"]):
        print(f"error: node 0 wrote {token_file}, but this node does not see it after {settle:g} s: the save folder must be "
              "on a file system every node shares (and --save-name the same path on every node)", flush=True)
        return PROBE_FAILED
    print(json.dumps(info), flush=True)
    return 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pai_launch.jobstore")
    sub = parser.add_subparsers(dest="mode", required=True)
    serving = sub.add_parser("serve")
    serving.add_argument("--port", type=int, required=True)
    serving.add_argument("--info", required=True)
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
        code = serve(options.port, json.loads(options.info))
    else:
        code = probe(options.host, options.port, options.timeout, options.node, json.loads(options.fingerprint),
                     options.save_dir, options.settle)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
