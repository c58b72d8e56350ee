"""Shared test helpers: waiting on conditions, processes (liveness, subreaping, reaping zombies), running
`pai-launch` as a subprocess, reading its JSON log events and what the fake trainer reported, and files
(tree snapshots, hand-written safetensors bytes). Every tier, the conftest files and the chaos scenarios import
them from here as `tests.helpers`.

No fixed sleeps: every wait is `wait_until(predicate, timeout)` (or `wait_until_empty`) on a file, a log line or
a process.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psutil

from pai_launch.status.events import parse_lines
from pai_launch.wire import log_events

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAKE_TRAINER = TESTS / "fake_trainer.py"
#: The manual: the pages `mkdocs build` makes a site of (mkdocs.yml names each in its nav).
DOCS = REPO / "docs"
#: The interpreter that runs pai-launch in the process tiers: this one, or PAI_TEST_PYTHON's (another venv's, with
#: another torch or Python: tests/compat runs tiers that way).
PYTHON = os.environ.get("PAI_TEST_PYTHON") or sys.executable

T = TypeVar("T")
#: prctl(2) option: orphaned descendants re-parent to this process instead of PID 1.
_PR_SET_CHILD_SUBREAPER = 36


def docs_page(name: str) -> str:
    """The text of one page of the manual, by its path under docs/ (`users/exit-codes.md`)."""
    return (DOCS / name).read_text()


class WaitTimeout(AssertionError):
    pass


@contextlib.contextmanager
def agent_store() -> Iterator[dict[str, str]]:
    """A TCPStore hosted here for ranks a test starts by hand, as torchrun's and pai-launch's agent hosts it; yields
    the variables the ranks need. A store rank 0 hosted goes with rank 0's exit, and a rank still tearing its group
    down then can abort ("terminate called without an active exception", exit -6)."""
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    try:
        yield {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port), "TORCHELASTIC_USE_AGENT_STORE": "True"}
    finally:
        del store


def load_script(name: str):
    """A script of scripts/ as a module (`name` without .py), registered under that name: its dataclasses look
    their module up."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def wait_until(predicate: Callable[[], T], timeout: float, *, interval: float = 0.02, message: str = "") -> T:
    """Poll `predicate` until it returns something truthy (returned) or `timeout` seconds pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(predicate, "__name__", repr(predicate))
            raise WaitTimeout(f"timed out after {timeout} s waiting for {what} (last value: {value!r})")
        time.sleep(interval)


def wait_until_empty(current: Callable[[], list[T]], within: float, *, since: float | None = None,
                     interval: float = 0.02) -> list[T]:
    """Poll `current()` until it returns an empty list or `within` seconds after `since` (monotonic; default now)
    pass; return the last list (empty: everything went in time)."""
    deadline = (time.monotonic() if since is None else since) + within
    left = current()
    while left and time.monotonic() < deadline:
        time.sleep(interval)
        left = current()
    return left


# --- processes ------------------------------------------------------------------------------------
def is_live(proc: psutil.Process) -> bool:
    """Running and not a zombie (a zombie has exited; it only waits to be reaped)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def pid_is_live(pid: int) -> bool:
    """The process `pid` exists and is not a zombie."""
    try:
        return is_live(psutil.Process(pid))
    except psutil.Error:
        return False


def describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid} ({' '.join(proc.cmdline())[:200]!r}, status {proc.status()}, ppid {proc.ppid()})"
    except psutil.Error:
        return f"pid {proc.pid} (gone)"


def processes_mentioning(text: str) -> list[psutil.Process]:
    """Live processes (not this one) whose command line or working directory contains `text`."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if text in " ".join(proc.cmdline()) or text in proc.cwd():
                found.append(proc)
        except psutil.Error:
            continue
    return found


def kill_processes(procs: Iterable[psutil.Process]) -> None:
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass


def assert_all_gone(procs: Iterable[psutil.Process], *, within: float, mentioning: str | None = None, since: float
                    | None = None,
                    what: str = "processes of the run") -> None:
    """Every process in `procs` (and every process mentioning `mentioning`) is gone `within` seconds of `since`.

    Survivors are named in the failure and then killed, so one failure doesn't cascade.
    """
    procs = list(procs)

    def survivors() -> list[psutil.Process]:
        live = [proc for proc in procs if is_live(proc)]
        if mentioning is not None:
            known = {proc.pid for proc in live}
            live += [proc for proc in processes_mentioning(mentioning) if proc.pid not in known]
        return live

    left = wait_until_empty(survivors, within, since=since)
    if left:
        names = [describe(proc) for proc in left]
        kill_processes(left)
        raise AssertionError(f"{what} still alive {within} s later: {names}")


def become_subreaper() -> None:
    """Make this process a child subreaper: processes orphaned below it (for example after `kill -9` of
    pai-launch, itself a subreaper) re-parent to it instead of PID 1, so it can still see and reap them.
    Not Linux: nothing happens (orphans go to PID 1)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def reap_zombie_children(keep: Callable[[psutil.Process], bool] = lambda proc: False) -> None:
    """waitpid() this process's zombie children (orphans re-parented to a subreaper), except those `keep` picks
    (children whose exit status someone else, such as their Popen, still has to collect)."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for proc in children:
        if keep(proc):
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(proc.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError):
            pass


# --- pai-launch as a subprocess ---------------------------------------------------------------------
@dataclass
class Launch:
    """One `pai-launch` subprocess: its output goes to files, so nothing can block on a full pipe."""

    popen: subprocess.Popen
    stdout_path: Path
    stderr_path: Path
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait(self, timeout: float = 60) -> int:
        try:
            rc = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"pai-launch did not exit within {timeout} s; stderr:\n"
                                 f"{self.stderr[-4000:]}") from None
        if self.ended is None:
            self.ended = time.monotonic()
        return rc

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    def send(self, signum: int) -> float:
        """Send a signal to pai-launch; return the moment (monotonic) it was sent."""
        now = time.monotonic()
        self.popen.send_signal(signum)
        return now

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """pai-launch's own JSON log lines on stderr (workers' output lines there are skipped)."""
        return json_events(self.stderr, name)

    def event(self, name: str) -> dict[str, Any]:
        """The one event called `name` (fails when there is none or several)."""
        found = self.events(name)
        assert len(found) == 1, f"expected one {name} event, found {len(found)}:\n{self.log_summary()}"
        return found[0]

    def event_names(self) -> list[str]:
        return [event["event"] for event in self.events()]

    def error_line(self) -> str:
        """The one line a refused start prints (fails when stderr holds anything else)."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("pai-launch: error: "), self.stderr
        return lines[0]

    def log_summary(self) -> str:
        return "\n".join(json.dumps(event) for event in self.events())[-6000:] or self.stderr[-6000:]


def launch_env(tmp_root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment: no inherited run id, no GPUs (so --nproc is free), TMPDIR inside the test folder."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PAI_LAUNCH_")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    tmp = tmp_root / "tmp"
    tmp.mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


L = TypeVar("L", bound=Launch)


def start_pai_launch(args: list[str], *, cwd: Path, io_dir: Path, env: dict[str, str], name: str = "launch",
                     new_session: bool = False, prefix: Sequence[str] = (), entry: Sequence[str] = ("-m", "pai_launch"),
                     launch_class: type[L] = Launch) -> L:
    """`[PREFIX...] python -m pai_launch ARGS` with stdout/stderr in files io_dir/NAME.stdout and NAME.stderr.

    `new_session` makes it a process-group leader, like a shell job, so a test can signal its whole group as a
    terminal's Ctrl+C does; `prefix` runs it under another command (setpriv as another user, unshare as PID 1);
    `entry` replaces `-m pai_launch` (a wrapper script that injects a fault, say)."""
    io_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = io_dir / f"{name}.stdout", io_dir / f"{name}.stderr"
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        popen = subprocess.Popen(
            [*prefix, PYTHON, *entry, *args],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=new_session,
        )
    return launch_class(popen, stdout_path, stderr_path)


def run_pai_launch(args: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float,
                   name: str = "launch") -> tuple[Launch, set[psutil.Process]]:
    """start_pai_launch to its end (its output files beside `cwd`, in CWD.io/): the launch, and every process seen
    under it meanwhile, for a test of what is left. Killed, and a failure naming it, past `timeout`."""
    launch = start_pai_launch(list(args), cwd=cwd, io_dir=cwd.parent / f"{cwd.name}.io", env=env, name=name)
    seen: set[psutil.Process] = set()

    def ended() -> bool:
        try:
            seen.update(psutil.Process(launch.pid).children(recursive=True))
        except psutil.Error:
            pass
        return launch.popen.poll() is not None

    try:
        wait_until(ended, timeout, interval=0.2, message=f"pai-launch {' '.join(args)} to exit")
    finally:
        launch.kill()
    launch.wait()
    return launch, seen


def run_tool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m pai_launch ARGS` run to its end (doctor, status), its output captured."""
    return subprocess.run([PYTHON, "-m", "pai_launch", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


# --- logs -------------------------------------------------------------------------------------------
def json_events(text: str, name: str | None = None) -> list[dict[str, Any]]:
    """pai-launch's JSON log lines (objects with an "event") in `text`, those called `name` only if given;
    every other line (a worker's output, a traceback) is skipped. Every event is checked against the log's
    vocabulary (wire.log_events): an unknown name or a field its event does not declare fails the test."""
    events = parse_lines(text)
    problems = [problem for event in events for problem in log_events.undeclared(event)]
    assert not problems, "pai-launch logged outside its vocabulary (declare it in pai_launch/wire/log_events.py): " \
        f"{problems}"
    return [event for event in events if name is None or event["event"] == name]


def events_file(path: Path, name: str | None = None) -> list[dict[str, Any]]:
    """The events in a JSON-lines file pai-launch wrote (`SAVE/.pai-launch/events.jsonl`, a node's or a Slurm
    job's log), [] when there is none: read as json_events reads a stream."""
    return json_events(path.read_text(errors="replace"), name) if path.exists() else []


def stamp(event: dict[str, Any]) -> float:
    """A logged event's wall-clock time in seconds (from its ISO 8601 "timestamp")."""
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


# --- what the fake trainer reports ----------------------------------------------------------------------
def read_signal_log(path: Path) -> dict[int, list[str]]:
    """A fake trainer's --signal-log: rank -> the signal names it received, in order ({} before any)."""
    seen: dict[int, list[str]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            rank, name = line.split()
            seen.setdefault(int(rank), []).append(name)
    return seen


def read_ready_dir(folder: Path, generation: int) -> dict[int, tuple[int, int | None]]:
    """A fake trainer's --ready-dir: rank -> (pid, its --spawn-grandchild sleeper's pid or None) for every
    process of `generation` that is running (files GEN-RANK.PID; temporary files skipped)."""
    found = {}
    for path in folder.iterdir():
        stem, dot, pid = path.name.partition(".")
        if path.name.endswith(".tmp") or not dot or "-" not in stem:
            continue
        gen, rank = (int(part) for part in stem.split("-"))
        if gen == generation:
            text = path.read_text().strip()
            found[rank] = (int(pid), int(text) if text else None)
    return found


# --- files ------------------------------------------------------------------------------------------
def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry under `root` (itself included): kind, content hash, size, mode and mtime_ns."""
    state: dict[str, tuple] = {}
    paths = [root, *sorted(root.rglob("*"))]
    for path in paths:
        st = path.lstat()
        rel = str(path.relative_to(root))
        if path.is_symlink():
            state[rel] = ("link", os.readlink(path), st.st_mtime_ns)
        elif path.is_dir():
            state[rel] = ("dir", st.st_mode, st.st_mtime_ns)
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            state[rel] = ("file", digest, st.st_size, st.st_mode, st.st_mtime_ns)
    return state


def safetensors_bytes(payload: bytes, extra_header: dict[str, Any] | None = None) -> bytes:
    """A whole safetensors file holding one uint8 tensor `w` (the format PerforatedAI saves), written by hand:
    8-byte little-endian header length, the JSON header, the data. tests/fake_trainer.py, a standalone script,
    keeps its own copy of these lines."""
    header = json.dumps({"w": {"dtype": "U8", "shape": [len(payload)], "data_offsets": [0, len(payload)]},
                         **(extra_header or {})}).encode()
    return len(header).to_bytes(8, "little") + header + payload


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


# --- another local user -------------------------------------------------------------------------------
#: A real unprivileged user the tests act as (useradd'ed when absent) to try what another local user could.
LOCAL_USER = "pai-intruder"


def local_user_unavailable() -> str | None:
    """Why the tests cannot act as another local user here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root: a second local user is made with useradd and acted as with setpriv"
    missing = [tool for tool in ("useradd", "setpriv", "flock") if shutil.which(tool) is None]
    return f"{missing} missing: install them with scripts/system_tools.sh (pai_system_tools)" if missing else None


def local_user() -> tuple[int, int]:
    """(uid, gid) of LOCAL_USER, made now when absent (as root)."""
    import pwd

    try:
        entry = pwd.getpwnam(LOCAL_USER)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", LOCAL_USER], capture_output=True, text=True,
                              timeout=60)
        try:  # made now, or by a concurrent run just before (useradd then fails)
            entry = pwd.getpwnam(LOCAL_USER)
        except KeyError:
            raise AssertionError(f"useradd {LOCAL_USER} failed: {made.stderr.strip()}") from None
    return entry.pw_uid, entry.pw_gid


def as_user(ids: tuple[int, int], *, read_all: bool = False) -> list[str]:
    """setpriv's prefix to act as the user `ids`; `read_all`: may also read and search everything (to run this
    interpreter, which may live under /root), with no other privilege."""
    caps = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"] if read_all else []
    return ["setpriv", f"--reuid={ids[0]}", f"--regid={ids[1]}", "--clear-groups", *caps, "--"]


_SQUAT = """import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(bytes.fromhex(sys.argv[1]))
if sys.argv[2] == "listen":
    s.listen(1)
print("bound", flush=True)
sys.stdin.read()
"""


def squat_socket(ids: tuple[int, int], address: str, *, listen: bool) -> subprocess.Popen:
    """A process of the user `ids` bound to the abstract unix socket `address` (listening if `listen`), once bound;
    it lives until its stdin is closed."""
    proc = subprocess.Popen([*as_user(ids, read_all=True), PYTHON, "-c", _SQUAT, address.encode().hex(),
                             "listen" if listen else "bind"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if line != "bound":
        proc.kill()
        proc.wait()
        raise AssertionError(f"the squatting socket could not bind {address[1:]!r}")
    return proc


def end_squat(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
