"""The supervisor's side of a multi-node job: node 0 starts the job's store process and feeds it; the
other nodes check the job before they start. Both run `python -m pai_launch.jobstore` (which imports
torch), so the supervisor itself never does.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pai_launch import crossnode, exitcodes, procs
from pai_launch.events import JobStoreLost, SignalReceived
from pai_launch.machine_state import STOP_SIGNALS
from pai_launch.nodes import Nodes
from pai_launch.record import STATE_DIR
from pai_launch.threads import start_guarded

TOKEN_FILE = f"{STATE_DIR}/coordinator"
STOP_KEY = crossnode.STOP
#: The store process imports torch before it answers: generous on a loaded machine.
STORE_START_TIMEOUT = 120.0


class JobSetupError(Exception):
    """The job cannot start on this node; the message is one line naming the fix."""


def _jobstore_argv(python: str, *args: str) -> list[str]:
    bootstrap = ("import sys; sys.path.insert(0, {root!r}); from pai_launch.jobstore import main; main()"
                 .format(root=str(Path(__file__).resolve().parent.parent)))
    return [python, "-c", bootstrap, *args]


def job_fingerprint(fingerprint: dict, nodes: Nodes) -> dict:
    """What every node must agree on: the command (as state.json records it) and the node count."""
    return {**fingerprint, "nnodes": f"{nodes.min_nodes}:{nodes.max_nodes}"}


class StoreHost:
    """Node 0's store process: started before anything else, stopped after everything else.

    The job's facts go in at start; the token is published once this node holds the save folder
    (publish_token), and the other nodes' checks wait for it."""

    def __init__(self, python: str, env: dict[str, str], nodes: Nodes, info: dict) -> None:
        self.info = info
        self.popen = subprocess.Popen(
            _jobstore_argv(python, "serve", "--port", str(nodes.port), "--info", json.dumps(info)),
            env={"TORCH_CPP_LOG_LEVEL": "ERROR", **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )
        self.pid = self.popen.pid
        self._lock = threading.Lock()
        self._closing = False

    def wait_ready(self, timeout: float = STORE_START_TIMEOUT) -> None:
        """JobSetupError when the store could not be served (its port is taken, torch is missing)."""
        answer: list[bytes] = []
        reader = threading.Thread(target=lambda: answer.append(self.popen.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        line = answer[0].decode(errors="replace").strip() if answer else ""
        if line == "ready":
            for stream in (self.popen.stdout, self.popen.stderr):  # drained, so a chatty store never blocks on a pipe
                threading.Thread(target=lambda s=stream: s.read(), name=f"store-drain-{self.pid}", daemon=True).start()
            return
        self.popen.kill()
        _, err = self.popen.communicate(timeout=10)
        detail = line.removeprefix("error: ") or (err.decode(errors="replace").strip().splitlines() or ["no answer"])[-1]
        raise JobSetupError(detail)

    def watch(self, report: Callable[[object], None]) -> None:
        """Report JobStoreLost if the store process ends before close() (killed, crashed)."""
        def wait() -> None:
            code = self.popen.wait()
            if not self._closing:
                report(JobStoreLost(f"the job's store process (PID {self.pid}) ended with "
                                    f"{exitcodes.describe_returncode(code)}: no node can go on without it",
                                    time.monotonic()))

        start_guarded(wait, name=f"store-{self.pid}", report=report)

    def publish_token(self, save_dir: Path) -> None:
        """Write the token file in the (now held) save folder, then tell the store: other nodes look for it."""
        self.info = {**self.info, "token": write_token(save_dir), "token_file": TOKEN_FILE}
        self.set(crossnode.INFO, json.dumps(self.info))

    def set(self, key: str, value: str) -> None:
        with self._lock:
            try:
                self.popen.stdin.write((json.dumps({"set": [key, value]}) + "\n").encode())
                self.popen.stdin.flush()
            except (OSError, ValueError):
                pass

    def close(self, timeout: float = 10.0) -> None:
        """EOF on its stdin: it lingers a moment (for a stop flag to be seen) and exits; killed if it does not."""
        self._closing = True
        try:
            self.popen.stdin.close()
        except OSError:
            pass
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def write_token(save_dir: Path) -> str:
    """A fresh token in SAVE/.pai-launch/coordinator: the other nodes must see it to know the folder is shared."""
    token = secrets.token_hex(8)
    path = save_dir / TOKEN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(token + "\n")
    os.replace(temp, path)
    return token


def store_info(nodes: Nodes, *, run_id: str, job_id: str, fingerprint: dict) -> dict:
    return {"run_id": run_id, "job_id": job_id, "fingerprint": fingerprint, "min_nodes": nodes.min_nodes,
            "max_nodes": nodes.max_nodes}


def stop_requested(inbox: queue.SimpleQueue) -> bool:
    """Whether a stop signal is queued (everything stays queued, in order, for the run's loop)."""
    held, stop = [], False
    while True:
        try:
            item = inbox.get_nowait()
        except queue.Empty:
            break
        held.append(item)
        stop = stop or (isinstance(item, SignalReceived) and item.signum in STOP_SIGNALS)
    for item in held:
        inbox.put(item)
    return stop


def probe(python: str, env: dict[str, str], nodes: Nodes, fingerprint: dict, save_dir: Path, settle: float,
          interrupted: Callable[[], bool]) -> dict:
    """Check the job from a node other than 0; its facts (run id, job id), or JobSetupError.

    `interrupted()` is asked while the probe waits (up to --rdzv-timeout): True stops it (None returned as {}).
    """
    argv = _jobstore_argv(python, "probe", "--host", nodes.host, "--port", str(nodes.port), "--timeout",
                          str(nodes.rdzv_timeout), "--node", str(nodes.node_rank), "--fingerprint", json.dumps(fingerprint),
                          "--save-dir", str(save_dir), "--settle", str(settle))
    popen = subprocess.Popen(procs.dies_with_parent(argv, python=python), env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    while True:
        try:
            out, err = popen.communicate(timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            if interrupted():
                popen.kill()
                popen.communicate()
                return {}
    lines = out.decode(errors="replace").strip().splitlines()
    last = lines[-1] if lines else ""
    if popen.returncode == 0 and last.startswith("{"):
        return json.loads(last)
    if last.startswith("error: "):
        raise JobSetupError(last.removeprefix("error: "))
    tail = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
    raise JobSetupError(f"the check against node 0's store failed ({tail}): is torch installed for {python}?")


def open_job(spec, session, env: dict[str, str], inbox: queue.SimpleQueue) -> StoreHost | None:
    """Multi-node, before this node takes anything: node 0 serves the job's store (its StoreHost is returned);
    another node checks the job against it and takes node 0's run id. JobSetupError: one line, exit 2."""
    from pai_launch import plan
    from pai_launch.notify import child_env

    nodes = spec.nodes
    if not nodes.multi:
        return None
    fingerprint = job_fingerprint(session.fingerprint, nodes)
    if nodes.coordinator:
        info = store_info(nodes, run_id=session.run_id, job_id=plan.job_id(spec, session.run_id), fingerprint=fingerprint)
        host = StoreHost(spec.python, child_env(env), nodes, info)
        host.wait_ready()
        return host
    info = probe(spec.python, child_env(env), nodes, fingerprint, session.save_dir, spec.fs_settle,
                 lambda: stop_requested(inbox))
    if info:
        session.join_job(info["run_id"])
    return None
