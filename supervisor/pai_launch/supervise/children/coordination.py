"""The supervisor's side of a multi-node job: node 0 starts the job's store process and feeds it; the
other nodes check the job before they start, and then keep a process connected to the store that reports
its loss at once. Both run `python -m pai_launch.store.server` (which imports torch), so the supervisor itself
never does.
"""

from __future__ import annotations

import dataclasses
import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pai_launch.core import exitcodes
from pai_launch.core.events import JobStopSeen, JobStoreLost
from pai_launch.core.observations import SignalReceived
from pai_launch.core.state import STOP_SIGNALS
from pai_launch.linux import procs
from pai_launch.placement.nodes import Nodes
from pai_launch.supervise.children.threads import start_guarded
from pai_launch.supervise.job import plan
from pai_launch.wire import codec, crossnode, jobsecret, storevalues
from pai_launch.wire.errors import LaunchError
from pai_launch.wire.storepipe import (
    FROM_STORE,
    JobJoined,
    Refused,
    Secret,
    Serving,
    SetValue,
    StopCarried,
    StoreClosed,
    StoreGone,
)

#: The store process imports torch before it answers: generous on a loaded machine.
STORE_START_TIMEOUT = 120.0


class JobSetupError(LaunchError):
    """The job cannot start on this node; the message is one line naming the fix."""


def _jobstore_argv(python: str, *args: str) -> list[str]:
    bootstrap = ("import sys; sys.path.insert(0, {root!r}); from pai_launch.store.server import main; main()"
                 .format(root=plan.package_root()))
    return [python, "-c", bootstrap, *args]


def job_fingerprint(fingerprint: dict, nodes: Nodes, restructure: str) -> dict:
    """What every node must agree on: the command (as state.json records it), the node count and --restructure (the
    workers of one job either all exit at a restructure or all train on)."""
    return {**fingerprint, "nnodes": f"{nodes.min_nodes}:{nodes.max_nodes}", "restructure": restructure}


class StoreHost:
    """Node 0's store process: started before anything else, stopped after everything else.

    The job's secret goes in first, on its stdin (never in a command line others can read), then the job's
    facts; the secret's file is written, and its digest published, once this node holds the save folder
    (publish_token), and the other nodes' checks wait for it."""

    def __init__(self, python: str, env: dict[str, str], nodes: Nodes, facts: storevalues.JobFacts) -> None:
        self.facts = facts
        self.secret = jobsecret.new_secret()
        self.popen = subprocess.Popen(
            _jobstore_argv(python, "serve", "--host", nodes.host, "--port", str(nodes.port), "--facts",
                           codec.encode_text(facts)),
            env={"TORCH_CPP_LOG_LEVEL": "ERROR", **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )
        self.pid = self.popen.pid
        #: Which of torch's store servers serves the job: "libuv" or "legacy" (wait_ready tells).
        self.backend = ""
        self._lock = threading.Lock()
        self._closing = False
        self._send(Secret(self.secret))

    def wait_ready(self, timeout: float = STORE_START_TIMEOUT) -> None:
        """JobSetupError when the store could not be served (its port is taken, torch is missing)."""
        answer: list[bytes] = []
        reader = threading.Thread(target=lambda: answer.append(self.popen.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        said = _said(answer[0] if answer else b"")
        if isinstance(said, Serving):
            self.backend = said.backend
            for stream in (self.popen.stdout, self.popen.stderr):  # drained, so a chatty store never blocks on a pipe
                threading.Thread(target=lambda s=stream: s.read(), name=f"store-drain-{self.pid}", daemon=True).start()
            return
        self.popen.kill()
        _, err = self.popen.communicate(timeout=10)
        detail = said.error if isinstance(said, Refused) else \
            (err.decode(errors="replace").strip().splitlines() or ["no answer"])[-1]
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
        """Write the secret file in the (now held) save folder, then publish its digest: other nodes look for it.
        SecretError when it cannot be written."""
        jobsecret.write(save_dir, self.secret)
        self.put(crossnode.INFO, storevalues.StoreInfo(jobsecret.digest(self.secret), jobsecret.SECRET_FILE))

    def put(self, key: crossnode.ValueKey, value) -> None:
        """Set `key` to `value` in the job's store (named and sealed with the job's secret there)."""
        self._send(SetValue(key.name, key.encode(value)))

    def _send(self, command) -> None:
        with self._lock:
            try:
                self.popen.stdin.write(codec.encode(command))
                self.popen.stdin.flush()
            except (OSError, ValueError):
                pass

    def close(self, timeout: float = 10.0) -> None:
        """EOF on its stdin: it lingers a moment (for a stop flag to be seen) and exits; killed if it does not."""
        self._closing = True
        _end(self.popen, timeout)


def job_facts(nodes: Nodes, *, run_id: str, job_id: str, fingerprint: dict) -> storevalues.JobFacts:
    return storevalues.JobFacts(run_id=run_id, job_id=job_id, fingerprint=fingerprint, min_nodes=nodes.min_nodes,
                              max_nodes=nodes.max_nodes)


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


class StoreWatch:
    """On a node other than 0: the job's check, then a process connected to node 0's store for the whole run, which
    reports JobStoreLost within seconds of the store going away without closing (node 0 or its store killed)."""

    def __init__(self, python: str, env: dict[str, str], nodes: Nodes, fingerprint: dict, save_dir: Path,
                 settle: float) -> None:
        self.where = f"{nodes.host}:{nodes.port}"
        argv = _jobstore_argv(python, "probe", "--host", nodes.host, "--port", str(nodes.port), "--timeout",
                              str(nodes.rdzv_timeout), "--node", str(nodes.node_rank), "--fingerprint",
                              json.dumps(fingerprint), "--save-dir", str(save_dir), "--settle", str(settle))
        self.python = python
        self.popen = subprocess.Popen(procs.dies_with_parent(argv, python=python),
                                      env={"TORCH_CPP_LOG_LEVEL": "ERROR", **env},
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True)
        self.pid = self.popen.pid
        self._closing = False

    def check(self, interrupted: Callable[[], bool]) -> JobJoined | None:
        """The job's facts (run id, job id) and its secret once node 0's store agrees, or JobSetupError; None when
        `interrupted()` turned True while it waited (up to --rdzv-timeout)."""
        answer: list[bytes] = []
        reader = threading.Thread(target=lambda: answer.append(self.popen.stdout.readline()), daemon=True)
        reader.start()
        while reader.is_alive():
            reader.join(0.2)
            if reader.is_alive() and interrupted():
                self.popen.kill()
                self.close()
                return None
        said = _said(answer[0] if answer else b"")
        if isinstance(said, JobJoined):
            threading.Thread(target=self.popen.stderr.read, name=f"watch-drain-{self.pid}", daemon=True).start()
            return said
        self.close()
        if isinstance(said, Refused):
            raise JobSetupError(said.error)
        err = self.popen.stderr.read().decode(errors="replace").strip().splitlines()
        raise JobSetupError(f"the check against node 0's store failed ({(err or ['no output'])[-1]}): is torch "
                            "installed "
                            f"for {self.python}?")

    def watch(self, report: Callable[[object], None]) -> None:
        """Report JobStoreLost when the watch says the store is gone (or the watch itself dies before close()), and
        JobStopSeen when node 0's store closed with a stop this node's agent did not see."""
        def wait() -> None:
            said = _said(self.popen.stdout.readline())
            code = self.popen.wait()
            if isinstance(said, StopCarried):
                report(JobStopSeen(said.flag.signal, said.flag.reason, time.monotonic()))
                return
            if self._closing or isinstance(said, StoreClosed):
                return
            why = (said.why if isinstance(said, StoreGone)
                   else f"its watch (PID {self.pid}) ended with {exitcodes.describe_returncode(code)}")
            report(JobStoreLost(store_lost_reason(self.where, why), time.monotonic()))

        start_guarded(wait, name=f"store-watch-{self.pid}", report=report)

    def close(self, timeout: float = 10.0) -> None:
        """EOF on its stdin: it leaves the store (node 0's store stops waiting for it) and exits; killed if not."""
        self._closing = True
        _end(self.popen, timeout)


def _end(popen: subprocess.Popen, timeout: float) -> None:
    """EOF on a store process's stdin, its word to leave; killed if it has not left within `timeout`."""
    try:
        popen.stdin.close()
    except OSError:
        pass
    try:
        popen.wait(timeout)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait()


def _said(line: bytes):
    """A store process's line as its message; None for nothing (it died first) or a line that is none (its
    stderr then says why)."""
    try:
        return FROM_STORE.decode(line) if line.strip() else None
    except codec.WireError:
        return None


def store_lost_reason(where: str, why: str) -> str:
    """One line for a lost job store, the same words on every node."""
    return f"the job's store at {where} went away ({why}): node 0's pai-launch or its store process is gone, and no " \
        "node can go on without it"


@dataclasses.dataclass
class Job:
    """This node's link to the job: node 0's store host, or another node's watch of it."""

    host: StoreHost | None = None
    watch: StoreWatch | None = None

    @property
    def pid(self) -> int | None:
        return (self.host or self.watch).pid if (self.host or self.watch) else None

    def start_watching(self, report: Callable[[object], None]) -> None:
        (self.host or self.watch).watch(report)

    def close(self) -> None:
        for part in (self.host, self.watch):
            if part is not None:
                part.close()


def open_job(spec, session, env: dict[str, str], inbox: queue.SimpleQueue):
    """Multi-node, before this node takes anything: node 0 serves the job's store; another node checks the job
    against it, takes node 0's run id and the job's secret, and keeps watching the store. Returns the spec (with
    the secret) and the Job (None on one machine). JobSetupError: one line, exit 2."""
    from pai_launch.supervise.outputs.notify import child_env

    nodes = spec.nodes
    if not nodes.multi:
        return spec, None
    fingerprint = job_fingerprint(session.fingerprint, nodes, spec.restructure)
    if nodes.coordinator:
        facts = job_facts(nodes, run_id=session.run_id, job_id=plan.job_id(spec, session.run_id),
                          fingerprint=fingerprint)
        host = StoreHost(spec.python, child_env(env), nodes, facts)
        host.wait_ready()
        return dataclasses.replace(spec, nodes=dataclasses.replace(nodes, secret=host.secret)), Job(host=host)
    watch = StoreWatch(spec.python, child_env(env), nodes, fingerprint, session.save_dir, spec.fs_settle)
    joined = watch.check(lambda: stop_requested(inbox))
    if joined is None:
        return spec, None
    session.join_job(joined.facts.run_id)
    return dataclasses.replace(spec, nodes=dataclasses.replace(nodes, secret=joined.secret)), Job(watch=watch)
