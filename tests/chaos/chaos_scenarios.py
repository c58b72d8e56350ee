"""Chaos scenarios: one fault injected into a real pai-launch run each, judged on what an operator would see.

Every scenario runs the real `pai-launch` (real elastic agent, real worker processes) on either the
fake trainer (tests/fake_trainer.py, precise control, about a second per generation) or the real
PerforatedAI example (examples/train_pai_ddp.py, via tests/chaos/faulty_example.py for faults, 20-30 s
a run). Each is judged on four things:

- the scenario's own checks (exit code, timing, pai-launch's JSON log events, the save folder);
- processes left: every process seen under pai-launch while it ran (polled every 50 ms), and every
  process whose command line or working directory names the scenario's folder, must be gone within
  2 s of the end;
- files lost: every file ever seen in the working directory (user files planted before the run, and
  everything the trainer saved) must still be there at the end, unless the scenario removed it on
  purpose or pai-launch moved it to SAVE/.pai-launch/quarantine/.

The registry SCENARIOS feeds both scripts/chaos.py (a table over all of them; run it from the repository
root as `python -m scripts.chaos`) and tests/chaos/test_chaos.py (one pytest test each). This module is
`tests.chaos.chaos_scenarios`: it imports its helpers from `tests.helpers`, with the repository root on
sys.path (pytest puts it there, and so does `python -m` run from the root).

Folder layout of one scenario (under its root):
    work/   pai-launch's working directory (save folder PAI/, the planted user files)
    io/     pai-launch's stdout/stderr per launch, the fake trainer's ready files and signal log
    tmp/    TMPDIR
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from pai_launch.savefmt.pathlock import PathLock
from tests.helpers import (
    FAKE_TRAINER,
    REPO,
    Launch,
    as_user,
    describe,
    end_squat,
    events_file,
    is_live,
    kill_processes,
    launch_env,
    local_user,
    local_user_unavailable,
    processes_mentioning,
    read_ready_dir,
    read_signal_log,
    reap_zombie_children,
    squat_socket,
    start_pai_launch,
    tree_state,
    wait_until,
    wait_until_empty,
)

CHAOS = Path(__file__).resolve().parent
EXAMPLE = REPO / "examples" / "train_pai_ddp.py"
FAULTY_EXAMPLE = CHAOS / "faulty_example.py"
ORPHANING_TRAINER = CHAOS / "orphaning_trainer.py"
NO_PAI_FLAGS = CHAOS / "no_pai_flags.py"
NO_USR1_HANDLER = CHAOS / "no_usr1_handler_trainer.py"
DDP_SPIN_ONCE = CHAOS / "ddp_spin_once.py"
UNSHARE = ("unshare", "--pid", "--fork", "--mount-proc")

#: How long after the end every process of the run must be gone (kill -9 included).
GONE_WITHIN_S = 2.0
#: Ranks per run: what the project targets on this 2-core machine.
NPROC = "2"
#: Trainer kinds: "fake" (tests/fake_trainer.py), "real" (the PerforatedAI example), "none" (nothing is started).
FAKE, REAL, NONE = "fake", "real", "none"
_QUARANTINED = re.compile(r"^(?P<name>.+)\.\d{8}-\d{6}(\.\d+)?$")


class ScenarioError(AssertionError):
    """The scenario could not go on (pai-launch ended too early, a wait timed out)."""


# --- processes ------------------------------------------------------------------------------------------
class ProcessTracker:
    """Remembers every process ever seen under the watched roots (pai-launch, or unshare around it)."""

    INTERVAL = 0.05

    def __init__(self, root: Path, on_tick: Callable[[], None] | None = None) -> None:
        self.root = str(root)
        self.roots: set[int] = set()
        self.seen: dict[tuple[int, float], psutil.Process] = {}
        self.under: dict[int, set[tuple[int, float]]] = {}
        self._on_tick = on_tick
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="chaos-tracker", daemon=True)
        self._thread.start()

    def watch(self, pid: int) -> None:
        with self._lock:
            self.roots.add(pid)
        self.poll()

    def poll(self) -> None:
        with self._lock:
            roots = list(self.roots)
        for pid in roots:
            try:
                children = psutil.Process(pid).children(recursive=True)
            except psutil.Error:
                continue
            for proc in children:
                try:
                    key = (proc.pid, proc.create_time())
                except psutil.Error:
                    continue
                self.seen.setdefault(key, proc)
                self.under.setdefault(pid, set()).add(key)

    def descendants_seen(self, pid: int) -> int:
        """How many processes were ever seen under `pid` (a watched root)."""
        self.poll()
        return len(self.under.get(pid, ()))

    def _loop(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            self.poll()
            if self._on_tick is not None:
                self._on_tick()

    def survivors(self) -> list[psutil.Process]:
        live = {proc.pid: proc for proc in self.seen.values() if is_live(proc)}
        for proc in processes_mentioning(self.root):
            live.setdefault(proc.pid, proc)
        return list(live.values())

    def wait_gone(self, within: float, since: float | None = None) -> list[psutil.Process]:
        """The processes still alive `within` seconds after `since` (default: now)."""
        self.poll()
        return wait_until_empty(self.survivors, within, since=since)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


# --- files ----------------------------------------------------------------------------------------------
class FileLedger:
    """Every file ever seen under the working directory; which of them are gone at the end."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.seen: set[str] = set()
        self._lock = threading.Lock()

    def listing(self) -> set[str]:
        found = set()
        for current, dirs, files in os.walk(self.work):
            rel_dir = os.path.relpath(current, self.work)
            parts = [] if rel_dir == "." else rel_dir.split(os.sep)
            if ".pai-launch" in parts and "quarantine" not in parts:
                continue  # pai-launch's own state (its temp files come and go); the quarantine is kept
            for name in files:
                if name.endswith(".tmp") or name.startswith(".state-"):
                    continue
                found.add(os.path.normpath(os.path.join(rel_dir, name)))
        return found

    def snapshot(self) -> None:
        try:
            now = self.listing()
        except OSError:
            return
        with self._lock:
            self.seen |= now

    def lost(self, removed_on_purpose: set[str]) -> list[str]:
        final = self.listing()
        quarantined = set()
        for rel in final:
            parts = rel.split(os.sep)
            if len(parts) >= 3 and parts[-3:-1] == [".pai-launch", "quarantine"]:
                match = _QUARANTINED.match(parts[-1])
                if match:
                    quarantined.add(os.path.join(*parts[:-3], match.group("name")) if parts[:-3]
                                    else match.group("name"))
        with self._lock:
            gone = self.seen - final
        return sorted(rel for rel in gone if rel not in removed_on_purpose and rel not in quarantined)


# --- one scenario run -----------------------------------------------------------------------------------
class PidOneLaunch(Launch):
    """pai-launch as PID 1 of a new PID namespace: `popen` is unshare, signals go to its child (pai-launch)."""

    def pai_pid(self, timeout: float = 10.0) -> int:
        def child() -> int | None:
            try:
                children = psutil.Process(self.popen.pid).children()
            except psutil.Error:
                return None
            return children[0].pid if children else None

        return wait_until(child, timeout, interval=0.002, message="pai-launch to start under unshare")

    def send(self, signum: int) -> float:
        pid = self.pai_pid()
        now = time.monotonic()
        os.kill(pid, signum)
        return now

    def kill(self) -> None:
        """SIGKILL pai-launch (PID 1: the kernel then kills its whole namespace), then unshare."""
        if self.popen.poll() is None:
            try:
                for child in psutil.Process(self.popen.pid).children():
                    child.kill()
            except psutil.Error:
                pass
        super().kill()

    def namespace_proc(self) -> Path:
        """The namespace's own /proc, seen from here through pai-launch's root."""
        return Path(f"/proc/{self.pai_pid()}/root/proc")


@dataclass
class Result:
    scenario: str
    trainer: str
    expected: str
    outcome: str
    problems: list[str]
    left: list[str]
    lost: list[str]
    seconds: float
    root: Path
    skipped: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems and not self.left and not self.lost

    def report(self) -> str:
        lines = [f"{self.scenario} [{self.trainer}] in {self.seconds:.1f} s: {'PASS' if self.ok else 'FAIL'}",
                 f"  expected: {self.expected}", f"  outcome:  {self.outcome}"]
        lines += [f"  problem: {p}" for p in self.problems]
        lines += [f"  process left: {p}" for p in self.left]
        lines += [f"  file lost: {p}" for p in self.lost]
        lines.append(f"  folder: {self.root}")
        return "\n".join(lines)


class Run:
    """The working folders, launches, process tracker and file ledger of one scenario run."""

    def __init__(self, root: Path, trainer: str, timeout: float) -> None:
        self.root = root
        self.trainer = trainer
        self.work = root / "work"
        self.io = root / "io"
        self.ready_dir = self.io / "ready"
        self.signal_log = self.io / "signals.log"
        self.hold_file = self.io / "release"
        for folder in (self.work, self.io, self.ready_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self.deadline = time.monotonic() + timeout
        self.env = launch_env(root)
        self.problems: list[str] = []
        self.launches: list[Launch] = []
        self.removed: set[str] = set()
        #: Run after the judging in close(), last first (e.g. unmounting what the scenario mounted).
        self.cleanups: list[Callable[[], None]] = []
        # The user's own files next to the save folder: nothing pai-launch does may touch them.
        (self.work / "notes.txt").write_text("the user's notes\n")
        (self.work / "data").mkdir(exist_ok=True)
        (self.work / "data" / "train.csv").write_text("x,y\n1,2\n")
        self.ledger = FileLedger(self.work)
        self.ledger.snapshot()
        self._ticks = 0
        self.tracker = ProcessTracker(root, on_tick=self._tick)

    def _tick(self) -> None:
        self._ticks += 1
        if self._ticks % 10 == 0:  # every 0.5 s: a file that appears and vanishes mid-run is still noticed
            self.ledger.snapshot()

    @property
    def save(self) -> Path:
        return self.work / "PAI"

    # --- judging ------------------------------------------------------------------------------------
    def check(self, condition: object, problem: str) -> bool:
        if not condition:
            self.problems.append(problem)
        return bool(condition)

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ScenarioError("the scenario ran out of time")
        return left

    # --- launching ----------------------------------------------------------------------------------
    def start(self, *pai_args: str, script: Path, script_args: tuple[str, ...] | list[str] = (), pid1: bool = False,
              env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> Launch:
        """`pai-launch --log-format json PAI_ARGS SCRIPT SCRIPT_ARGS` in work/ (as PID 1 of a new PID namespace with
        pid1;
        under `prefix`, a command that execs it, otherwise)."""
        self.ledger.snapshot()
        launch = start_pai_launch(["--log-format", "json", *pai_args, str(script), *script_args], cwd=self.work,
                                  io_dir=self.io, env={**self.env, **(env or {})}, name=f"launch{len(self.launches)}",
                                  prefix=UNSHARE if pid1 else prefix, launch_class=PidOneLaunch if pid1 else Launch)
        self.launches.append(launch)
        self.tracker.watch(launch.pid)
        return launch

    def finish(self, launch: Launch, timeout: float | None = None) -> int:
        rc = launch.wait(min(timeout, self.remaining()) if timeout is not None else self.remaining())
        self.ledger.snapshot()
        return rc

    def fake(self, *extra: str) -> tuple[Path, list[str]]:
        """The fake trainer with its ready files and signal log switched on."""
        return FAKE_TRAINER, ["--ready-dir", str(self.ready_dir), "--signal-log", str(self.signal_log), *extra]

    def faulty(self, **faults: str) -> tuple[Path, list[str], dict[str, str]]:
        """The real example, with CHAOS_* faults (see faulty_example.py); no fault when none are given."""
        return FAULTY_EXAMPLE, [], {f"CHAOS_{key.upper()}": str(value) for key, value in faults.items()}

    # --- waiting ------------------------------------------------------------------------------------
    def wait(self, launch: Launch, predicate: Callable[[], object], what: str, timeout: float | None = None):
        """Wait for `predicate`; fail early when pai-launch has already exited."""

        def ready():
            value = predicate()
            if value:
                return value
            if launch.popen.poll() is not None:
                raise ScenarioError(f"pai-launch exited with {launch.popen.returncode} while waiting for {what}:\n"
                                    + launch.log_summary()[-3000:])
            return None

        limit = self.remaining() if timeout is None else min(timeout, self.remaining())
        return wait_until(ready, limit, interval=0.02, message=what)

    def ready(self, generation: int) -> dict[int, int]:
        """rank -> pid of the fake trainer processes of `generation` that have started."""
        return {rank: pid for rank, (pid, _) in read_ready_dir(self.ready_dir, generation).items()}

    def progress(self, launch: Launch) -> list[dict]:
        """The real example's progress lines (`PAI_EXAMPLE {...}`) in pai-launch's stdout."""
        found = []
        for line in launch.stdout.splitlines():
            if "PAI_EXAMPLE " in line:
                try:
                    found.append(json.loads(line.split("PAI_EXAMPLE ", 1)[1]))
                except ValueError:
                    continue
        return found

    def wait_training(self, launch: Launch, generation: int) -> None:
        """Until every rank of `generation` is running (fake) or has taken its first optimizer step (real)."""
        if self.trainer == REAL:
            self.wait(launch, lambda: {p["rank"] for p in self.progress(launch)
                                       if p["event"] == "first_step" and p["gen"] == str(generation)} >= {0, 1},
                      f"generation {generation} to train")
        else:
            self.wait(launch, lambda: len(self.ready(generation)) >= int(NPROC), f"generation {generation}'s workers")

    def signals(self) -> dict[int, list[str]]:
        """rank -> signal names the fake trainer's processes received, in order."""
        return read_signal_log(self.signal_log)

    # --- the end ------------------------------------------------------------------------------------
    def close(self) -> tuple[list[str], list[str]]:
        """Stop whatever still runs (a problem in itself), then list the processes left and the files lost."""
        for launch in self.launches:
            if launch.popen.poll() is None:
                self.problems.append(f"pai-launch (pid {launch.pid}) was still running at the end: killed")
                launch.kill()
        self.ledger.snapshot()
        left = [describe(proc) for proc in self.tracker.wait_gone(GONE_WITHIN_S)]
        self.tracker.stop()
        if left:
            procs = self.tracker.survivors()
            kill_processes(procs)
            psutil.wait_procs(procs, timeout=2)
        unreaped = {launch.pid for launch in self.launches if launch.popen.returncode is None}
        reap_zombie_children(keep=lambda proc: proc.pid in unreaped)
        lost = self.ledger.lost(self.removed)
        for cleanup in reversed(self.cleanups):
            cleanup()
        self.cleanups.clear()
        return left, lost


# --- small readers --------------------------------------------------------------------------------------
def events(launch: Launch, name: str) -> list[dict]:
    return launch.events(name)


def finished(launch: Launch) -> dict:
    found = launch.events("run_finished")
    return found[-1] if found else {}


def stderr_lines(launch: Launch) -> list[str]:
    return [line for line in launch.stderr.splitlines() if line.strip()]


def namespace_pids(proc_dir: Path) -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir(proc_dir) if name.isdigit())
    except OSError:
        return []


def pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def processes_in_namespace(namespace: str) -> list[psutil.Process]:
    """Live processes (seen from here) in the PID namespace `namespace` (a readlink of /proc/PID/ns/pid)."""
    found = []
    for proc in psutil.process_iter():
        if pid_namespace(proc.pid) == namespace and is_live(proc):
            found.append(proc)
    return found


def sigterm_caught(pid: int) -> bool:
    """Whether `pid` has a SIGTERM handler installed (its SigCgt mask in /proc)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


def remove_tree(folder: Path, timeout: float = 5.0) -> set[str]:
    """Remove `folder` although processes keep writing into it; return the files it held (relative paths)."""
    held: set[str] = set()
    deadline = time.monotonic() + timeout
    while folder.exists():
        for path in folder.rglob("*"):
            if path.is_file():
                held.add(str(path))
        shutil.rmtree(folder, ignore_errors=True)
        if time.monotonic() > deadline:
            raise ScenarioError(f"could not remove {folder}")
    return held


def _fmt_exit(rc: int) -> str:
    return f"exit {rc}" if rc >= 0 else f"killed by {signal.Signals(-rc).name}"


# --- the scenarios --------------------------------------------------------------------------------------
def _trainer(run: Run, *, fake: list[str], fault: dict[str, str]
             | None = None) -> tuple[Path, list[str], dict[str, str]]:
    """(script, script args, extra environment) for this run's trainer."""
    if run.trainer == REAL:
        return run.faulty(**(fault or {}))
    script, args = run.fake(*fake)
    return script, args, {}


def rank_crash_once(run: Run) -> str:
    script, args, env = _trainer(run, fake=["--fail-rank", "1", "--fail-generation", "2", "--fail-code", "7",
                                            "--heartbeat", "0.1", "--train-seconds", "0.3"],
                                 fault=dict(fault="crash", rank=1, generations=2, at="epoch", epoch=1, code=7))
    launch = run.start("--nproc", NPROC, "--backoff", "0.3", script=script, script_args=args, env=env)
    rc = run.finish(launch)
    failed = events(launch, "generation_failed")
    retries = events(launch, "retry_scheduled")
    run.check(rc == 0, f"exit code {rc}, expected 0: {finished(launch).get('reason')}")
    run.check(len(failed) == 1 and failed[0].get("rank") == 1 and failed[0].get("exit") == "exit code 7",
              "expected one failed generation (rank 1, exit code 7), got "
              f"{[(f.get('rank'), f.get('exit')) for f in failed]}")
    run.check(len(retries) == 1, f"expected one retry, got {len(retries)}")
    run.check((run.save / ".training_complete").is_file(), "no .training_complete")
    gens = len(events(launch, "generation_started"))
    what = f"{failed[0].get('exit')} of rank {failed[0].get('rank')}" if failed else "no failure"
    return f"{_fmt_exit(rc)}; {gens} generations, 1 failed ({what}), {len(retries)} retry, complete"


def rank_crash_every_time(run: Run) -> str:
    # The fake's rank 0 fails (so no switch file is ever written: no progress); it writes latest.pt first (training).
    script, args, env = _trainer(run, fake=["--fail-rank", "0", "--fail-every", "--fail-code", "7",
                                            "--heartbeat", "0.1", "--train-seconds", "0.3"],
                                 fault=dict(fault="crash", rank=1, generations="all", at="epoch", epoch=1, code=7))
    launch = run.start("--nproc", NPROC, "--max-failures", "3", "--backoff", "0.3", script=script, script_args=args,
                       env=env)
    rc = run.finish(launch)
    failed = events(launch, "generation_failed")
    reason = finished(launch).get("reason", "")
    run.check(rc == 4, f"exit code {rc}, expected 4 (failure budget spent): {reason}")
    run.check(len(failed) == 3, f"expected 3 failed generations, got {len(failed)}")
    run.check("exit code 7" in reason, f"the final reason does not name the last failure: {reason!r}")
    delays = [e.get("delay_s") for e in events(launch, "retry_scheduled")]
    run.check(delays == sorted(delays) and len(delays) == 2 and delays[1] > delays[0], f"backoff not growing: {delays}")
    return f"{_fmt_exit(rc)} after {len(failed)} failed generations (retries after {delays} s): {reason}"


def crash_before_training(run: Run) -> str:
    # Rank 1 dies at once, every generation, before anything is written; rank 0 is stopped by torch.
    script, args, env = _trainer(run, fake=["--fail-rank", "1", "--fail-every", "--fail-code", "9", "--hang-rank", "0"],
                                 fault=dict(fault="crash", rank=1, generations="all", at="process_start", code=9))
    launch = run.start("--nproc", NPROC, "--max-failures", "5", "--backoff", "0.3", script=script, script_args=args,
                       env=env)
    rc = run.finish(launch)
    failed = events(launch, "generation_failed")
    reason = finished(launch).get("reason", "")
    run.check(rc == 9, f"exit code {rc}, expected the worker's 9: {reason}")
    run.check(len(failed) == 2, f"expected to stop after 2 identical failures (budget is 5), got {len(failed)}")
    run.check("before training" in reason, f"reason does not say 'before training': {reason!r}")
    return f"{_fmt_exit(rc)} after {len(failed)} identical failures (budget 5): {reason}"


def torn_switch(run: Run) -> str:
    script, args, env = _trainer(run, fake=["--torn-switch-generation", "2"],
                                 fault=dict(fault="tear", rank=0, generations=2, at="restructure_exit"))
    launch = run.start("--nproc", NPROC, script=script, script_args=args, env=env)
    rc = run.finish(launch)
    quarantined = events(launch, "checkpoint_quarantined")
    kept = sorted(p.name for p in (run.save / ".pai-launch" / "quarantine").glob("switch_*"))
    run.check(rc == 0, f"exit code {rc}, expected 0: {finished(launch).get('reason')}")
    run.check([q.get("file") for q in quarantined] == ["switch_4.pt"],
              f"quarantined: {[q.get('file') for q in quarantined]}")
    run.check(len(kept) == 1 and kept[0].startswith("switch_4.pt."), f"quarantine folder holds {kept}")
    return f"{_fmt_exit(rc)}; quarantined {[q.get('file') for q in quarantined]} " \
        f"({quarantined[0].get('problem') if quarantined else '-'}), kept as {kept}, resumed from switch_2.pt"


def garbage_switches(run: Run) -> str:
    script, args = run.fake("--garbage-switch", "--generations", "20")
    launch = run.start("--nproc", NPROC, "--backoff", "0.1", "--max-failures", "3", script=script, script_args=args)
    rc = run.finish(launch)
    reason = finished(launch).get("reason", "")
    kept = sorted(p.name for p in (run.save / ".pai-launch" / "quarantine").glob("switch_*"))
    run.check(rc == 4, f"exit code {rc}, expected 4: {reason}")
    run.check("no usable switch file" in reason, f"the reason does not name the unusable switch file: {reason!r}")
    run.check(len(kept) == 2, f"expected the first two generations' files kept in quarantine, got {kept}")
    return f"{_fmt_exit(rc)}: {reason}; quarantined {kept}"


def pipe_as_state_json(run: Run) -> str:
    run.save.mkdir()
    (run.save / "array_dims.csv").write_text(".fc1,1,32\n")
    (run.save / ".pai-launch").mkdir()
    os.mkfifo(run.save / ".pai-launch" / "state.json")
    script, args = run.fake()
    launch = run.start("--nproc", NPROC, script=script, script_args=args)
    rc = run.finish(launch, timeout=30)
    lines = stderr_lines(launch)
    aside = sorted(p.name for p in (run.save / ".pai-launch").glob("state.json.bad-*"))
    run.check(rc == 2, f"exit code {rc}, expected 2")
    run.check(len(lines) == 1 and "named pipe" in lines[0], f"expected one line naming the pipe, got {lines[:5]}")
    run.check(len(aside) == 1, f"expected the pipe moved aside, found {aside}")
    started = run.tracker.descendants_seen(launch.pid)
    run.check(started == 0, f"{started} process(es) were started")
    return f"{_fmt_exit(rc)}: {lines[0] if lines else '(nothing on stderr)'}"


def stale_marker(run: Run) -> str:
    run.save.mkdir()
    (run.save / "array_dims.csv").write_text(".fc1,1,32\n")
    (run.save / "switch_2.pt").write_bytes(b"\x00" * 64)
    (run.save / ".training_complete").write_text("complete\n")
    os.utime(run.save / ".training_complete", (time.time() - 86400, time.time() - 86400))
    before = tree_state(run.work)
    script = EXAMPLE if run.trainer == REAL else FAKE_TRAINER
    launch = run.start("--nproc", NPROC, script=script)
    rc = run.finish(launch, timeout=30)
    after = tree_state(run.work)
    changed = sorted(set(before) ^ set(after) | {k for k in before if k in after and before[k] != after[k]})
    run.check(rc == 0, f"exit code {rc}, expected 0")
    run.check(not changed, f"the folder changed: {changed}")
    run.check(events(launch, "already_complete"), "no already_complete event")
    started = run.tracker.descendants_seen(launch.pid)
    run.check(started == 0, f"{started} process(es) were started")
    return f"{_fmt_exit(rc)}, already complete; folder byte-for-byte unchanged: {not changed}; processes started: " \
        f"{started}"


def _stop_mid_generation_then_resume(run: Run, signum: int) -> str:
    script, args, env = _trainer(run, fake=["--hang-generation", "2"])
    pai = ("--nproc", NPROC, "--grace", "10")
    first = run.start(*pai, script=script, script_args=args, env=env)
    run.wait_training(first, 2)
    run.tracker.poll()
    run.ledger.snapshot()
    sent = first.send(signum)
    rc = run.finish(first, timeout=30)
    took = time.monotonic() - sent
    facts = []
    if signum == signal.SIGKILL:
        survivors = run.tracker.wait_gone(GONE_WITHIN_S, since=sent)
        run.check(rc == -signal.SIGKILL, f"pai-launch ended with {rc}")
        run.check(not survivors, f"alive {GONE_WITHIN_S} s after kill -9: {[describe(p) for p in survivors]}")
        facts.append(f"kill -9: {len(survivors)} processes left after {GONE_WITHIN_S:.0f} s")
    else:
        run.check(rc == 128 + signum, f"exit code {rc}, expected {128 + signum}")
        run.check(took < 10, f"took {took:.1f} s to stop with --grace 10")
        facts.append(f"{signal.Signals(signum).name}: {_fmt_exit(rc)} in {took:.1f} s (grace 10)")
        if run.trainer == FAKE:
            got = run.signals()
            run.check(all(got.get(r, []).count("SIGTERM") == 1 for r in (0, 1)), f"workers' signals: {got}")
    second = run.start(*pai, script=script, script_args=args, env=env)
    rc2 = run.finish(second)
    started = events(second, "generation_started")
    resumed = (events(second, "run_started") or [{}])[0].get("resumed")
    run.check(rc2 == 0, f"the restart exited {rc2}: {finished(second).get('reason')}")
    run.check(resumed is True, "the restart did not resume")
    run.check(not events(second, "init_started"), "the restart re-ran the init run")
    run.check(started and started[0].get("generation") == 3 and started[0].get("load_folder") == "PAI",
              f"the restart began with {started[:1]}, expected generation 3 from PAI")
    facts.append(f"restart: resumed at generation {started[0].get('generation') if started else '?'} "
                 f"from {started[0].get('load_folder') if started else '?'}, no init, {_fmt_exit(rc2)}")
    return "; ".join(facts)


def kill9_then_resume(run: Run) -> str:
    return _stop_mid_generation_then_resume(run, signal.SIGKILL)


def sigterm_then_resume(run: Run) -> str:
    return _stop_mid_generation_then_resume(run, signal.SIGTERM)


def pid1_sigterm(run: Run) -> str:
    script, args, env = _trainer(run, fake=["--hang"])
    launch = run.start("--nproc", NPROC, "--grace", "5", script=script, script_args=args, env=env, pid1=True)
    assert isinstance(launch, PidOneLaunch)
    run.wait_training(launch, 1)
    pai_pid = launch.pai_pid()
    namespace = pid_namespace(pai_pid)
    run.tracker.poll()
    sent = launch.send(signal.SIGTERM)
    rc = run.finish(launch, timeout=30)
    took = time.monotonic() - sent
    in_namespace = wait_until_empty(lambda: processes_in_namespace(namespace) if namespace else [], GONE_WITHIN_S)
    run.check(not in_namespace, f"still in the namespace: {[describe(p) for p in in_namespace]}")
    first = (events(launch, "run_started") or [{}])[0]
    run.check(first.get("pid") == 1, f"pai-launch was not PID 1 (run_started pid {first.get('pid')})")
    run.check(rc == 143, f"exit code {rc}, expected 143")
    run.check(took < 5 + 2, f"took {took:.1f} s with --grace 5")
    return f"PID 1: {_fmt_exit(rc)} {took:.1f} s after SIGTERM (grace 5); namespace empty: {not in_namespace}"


def worker_ignores_sigterm(run: Run) -> str:
    # Rank 0 also keeps writing to the save folder (every 20 ms) while it ignores SIGTERM: a busy save folder
    # must not keep pai-launch from noticing that the grace period is over.
    script, args, env = _trainer(run, fake=["--hang", "--ignore-sigterm", "--heartbeat", "0.02"])
    launch = run.start("--nproc", NPROC, "--grace", "3", script=script, script_args=args, env=env)
    run.wait_training(launch, 1)
    sent = launch.send(signal.SIGTERM)
    rc = run.finish(launch, timeout=30)
    took = time.monotonic() - sent
    run.check(rc == 143, f"exit code {rc}, expected 143")
    run.check(3 <= took < 3 + 2, f"stopped {took:.1f} s after SIGTERM; expected at the 3 s grace")
    run.check(events(launch, "run_killed"), "no run_killed event")
    got = run.signals()
    run.check(all(got.get(r) == ["SIGTERM"] for r in (0, 1)), f"workers' signals: {got}")
    return f"{_fmt_exit(rc)} {took:.1f} s after SIGTERM (grace 3): ignoring workers SIGKILLed at the grace"


def output_flood(run: Run) -> str:
    # Each rank prints 40 MB as fast as it can, in both generations: the run must end as it would have without.
    script, args, env = _trainer(run, fake=["--generations", "2", "--flood-mb", "40"])
    launch = run.start("--nproc", NPROC, "--grace", "2", script=script, script_args=args, env=env)
    rc = run.finish(launch)
    run.check(rc == 0, f"exit code {rc}, expected 0: {finished(launch).get('reason')}")
    ended = [e.get("exit") for e in events(launch, "generation_ended")]
    run.check(ended == ["all workers exited 0"] * 2 and not events(launch, "generation_failed"),
              f"generations ended {ended}, failed {len(events(launch, 'generation_failed'))}")
    out = launch.stdout_path.read_bytes()
    last = {rank: out.count(b"[rank%d]: rank %d flood done\n" % (rank, rank)) for rank in (0, 1)}
    run.check(last == {0: 2, 1: 2}, f"each rank's last line should be relayed once per generation: {last}")
    notes = out.count(b"pai-launch: skipped ")
    return f"{_fmt_exit(rc)}; 2 x 2 ranks x 40 MB relayed, every rank's last line shown ({notes} skip notes)"
def log_reader_quits(run: Run) -> str:
    # `pai-launch ... 2>&1 | head -1`: the reader of pai-launch's stderr takes one line and is gone.
    script, args, env = _trainer(run, fake=["--generations", "2", "--train-seconds", "0.3"])
    launch = run.start("--nproc", NPROC, script=script, script_args=args, env=env,
                       prefix=("bash", "-c", 'exec "$@" 2> >(head -1 >/dev/null)', "bash"))
    rc = run.finish(launch)
    path = run.save / ".pai-launch" / "events.jsonl"
    saved = events_file(path)
    lost = [event for event in saved if event["event"] == "console_lost"]
    ends = [event.get("exit_code") for event in saved if event["event"] == "run_finished"]
    run.check(rc == 0, f"exit code {rc}, expected 0")
    run.check(ends == [0], f"events.jsonl's run_finished exit codes: {ends}")
    run.check(len(lost) == 1 and lost[0].get("stream") == "stderr" and "BrokenPipe" in lost[0].get("error", ""),
              f"expected one console_lost for stderr (a broken pipe) in events.jsonl, got {lost}")
    run.check((run.save / ".training_complete").is_file(), "no .training_complete")
    return f"{_fmt_exit(rc)}, training complete; stderr lost after its first line, recorded once in events.jsonl"


def hung_rank(run: Run) -> str:
    stall = "20" if run.trainer == REAL else "3"
    script, args, env = _trainer(run, fake=["--hang-generation", "2"],
                                 fault=dict(fault="hang", rank=1, generations=2, at="epoch", epoch=0))
    if run.trainer == FAKE:
        script = NO_USR1_HANDLER  # like the example: SIGUSR1 (the stall's first signal) kills the workers
    launch = run.start("--nproc", NPROC, "--stall-timeout", stall, "--grace", "2", "--backoff", "0.3",
                       script=script, script_args=args, env=env)
    rc = run.finish(launch)
    stalls = events(launch, "stall_detected")
    retries = events(launch, "retry_scheduled")
    run.check(rc == 0, f"exit code {rc}, expected 0: {finished(launch).get('reason')}")
    run.check(len(stalls) == 1 and stalls[0].get("generation") == 2, f"stall_detected: {stalls}")
    run.check(len(retries) == 1 and "stall" in retries[0].get("reason", ""),
              f"retries: {[r.get('reason') for r in retries]}")
    failed = events(launch, "generation_failed")
    run.check(failed and failed[0].get("generation") == 2, f"generation 2 did not fail: {failed}")
    idle = stalls[0].get("idle_s") if stalls else None
    why = retries[0].get("reason") if retries else "no retry"
    return f"stall seen after {idle} s without a write (--stall-timeout {stall}); retried because {why!r}; " \
        f"{_fmt_exit(rc)}"


def second_launch(run: Run) -> str:
    if run.trainer == REAL:
        script, args, env = run.faulty()
    else:
        script, args = run.fake("--hold-until", str(run.hold_file))
        env = {}
    first = run.start("--nproc", NPROC, script=script, script_args=args, env=env)
    run.wait_training(first, 1)
    second = run.start("--nproc", NPROC, script=script, script_args=args, env=env)
    rc2 = run.finish(second, timeout=30)
    message = stderr_lines(second)
    run.check(rc2 == 2, f"the second pai-launch exited {rc2}, expected 2")
    run.check(len(message) == 1 and f"PID {first.pid}" in message[0], f"its message does not name PID {first.pid}: "
              f"{message}")
    run.check(first.popen.poll() is None, "the first pai-launch did not keep running")
    started = run.tracker.descendants_seen(second.pid)
    run.check(started == 0, f"the second pai-launch started {started} process(es)")
    run.hold_file.touch()
    rc1 = run.finish(first)
    run.check(rc1 == 0, f"the first pai-launch exited {rc1}")
    return f"second: {_fmt_exit(rc2)} ({message[0] if message else ''!s}); first went on: {_fmt_exit(rc1)}"


def lock_name_squatted(run: Run) -> str:
    """Another local user binds the save folder's path-lock name (predictable from its path) before the run."""
    squatter = squat_socket(local_user(), PathLock(run.save).address, listen=True)
    run.cleanups.append(lambda: end_squat(squatter))
    script, args = run.fake("--hold-until", str(run.hold_file))
    first = run.start("--nproc", NPROC, script=script, script_args=args)
    run.wait_training(first, 1)
    squatted = events(first, "save_lock_squatted")
    run.check(squatted and squatted[0].get("holder_pid") == squatter.pid,
              f"save_lock_squatted does not name the squatter's PID {squatter.pid}: {squatted}")
    second = run.start("--nproc", NPROC, script=script, script_args=args)
    rc2 = run.finish(second, timeout=30)
    message = stderr_lines(second)
    run.check(rc2 == 2 and len(message) == 1 and f"another pai-launch (PID {first.pid})" in message[0],
              f"the second pai-launch exited {rc2}, expected 2 naming PID {first.pid}: {message}")
    run.hold_file.touch()
    rc1 = run.finish(first)
    run.check(rc1 == 0, f"the first pai-launch exited {rc1}")
    return f"ran despite the squatter (PID {squatter.pid}): {_fmt_exit(rc1)}; a second one: {_fmt_exit(rc2)}"


def link_planted_in_save_folder(run: Run) -> str:
    """Another local user plants a symbolic link at SAVE/.pai-launch/lock.node0 (a folder an old pai-launch left
    writable to all) pointing at a file only root may touch."""
    secret = run.root / "root-only" / "secret"
    secret.parent.mkdir(mode=0o700)
    secret.write_text("root's own file\n")
    state = run.save / ".pai-launch"
    state.mkdir(parents=True)
    state.chmod(0o777)
    planted = subprocess.run([*as_user(local_user(), read_all=True), "ln", "-s", str(secret),
                              str(state / "lock.node0")],
                             capture_output=True, text=True, timeout=30)
    if planted.returncode != 0:
        raise ScenarioError(f"the other user could not plant the link: {planted.stderr.strip()}")
    before = tree_state(secret.parent)
    script, args = run.fake()
    launch = run.start("--nproc", NPROC, script=script, script_args=args)
    rc = run.finish(launch, timeout=30)
    lines = stderr_lines(launch)
    run.check(rc == 2, f"exit code {rc}, expected 2")
    run.check(len(lines) == 1 and "symbolic link" in lines[0], f"expected one line naming the link: {lines[:5]}")
    run.check(tree_state(secret.parent) == before, "the link's target was touched")
    started = run.tracker.descendants_seen(launch.pid)
    run.check(started == 0, f"{started} process(es) were started")
    return f"{_fmt_exit(rc)}: {lines[0] if lines else '(nothing on stderr)'}"


def save_folder_removed(run: Run) -> str:
    script, args, env = _trainer(run, fake=["--hang", "--heartbeat", "0.2"])
    launch = run.start("--nproc", NPROC, "--grace", "10", script=script, script_args=args, env=env)
    run.wait_training(launch, 1)
    run.ledger.snapshot()
    removed = remove_tree(run.save)
    # PerforatedAI's next save re-creates a removed save folder within moments (its writes make the folder):
    # do the same at once, so the removal cannot be noticed by the folder merely being missing.
    run.save.mkdir(exist_ok=True)
    run.removed |= {os.path.relpath(path, run.work) for path in removed}
    run.removed |= {rel for rel in run.ledger.seen if rel.startswith("PAI" + os.sep)}
    sent = time.monotonic()
    rc = run.finish(launch, timeout=30)
    took = time.monotonic() - sent
    reason = finished(launch).get("reason", "")
    run.check(rc == 6, f"exit code {rc}, expected 6: {reason}")
    run.check(took < 10, f"took {took:.1f} s to stop")
    # pai-launch records how the run ended in the new folder only once the script has written into it again.
    state = run.save / ".pai-launch"
    written = sorted(str(p.relative_to(run.work)) for p in state.rglob("*")) if state.exists() else []
    script_files = [p.name for p in run.save.iterdir() if p.name != ".pai-launch"] if run.save.is_dir() else []
    run.check(not state.exists() or bool(script_files), "pai-launch wrote its state into a new, empty folder: "
              f"{written}")
    if state.exists():
        last_exit = json.loads((state / "state.json").read_text()).get("last_exit") or {}
        run.check(last_exit.get("code") == 6, f"the new folder's state.json records {last_exit}, not the exit 6")
    return f"{_fmt_exit(rc)} {took:.1f} s after the removal: {reason}"


_MOUNT_PROBE: list[str | None] = []


def mount_unavailable() -> str | None:
    """Why this machine cannot mount a tmpfs or a read-only bind mount for a scenario (None: it can)."""
    if not _MOUNT_PROBE:
        reason = None
        if os.geteuid() != 0 or shutil.which("mount") is None or shutil.which("umount") is None:
            reason = "needs root and mount(8)"
        else:
            probe = Path(tempfile.mkdtemp(prefix="pai-chaos-mount-"))
            try:
                done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    reason = f"cannot mount a tmpfs: {done.stderr.strip()}"
                else:
                    subprocess.run(["umount", str(probe)], capture_output=True)
            finally:
                probe.rmdir()
        _MOUNT_PROBE.append(reason)
    return _MOUNT_PROBE[0]


def _mount(run: Run, *args: str, target: Path) -> None:
    done = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        raise ScenarioError(f"mount {' '.join(args)} {target}: {done.stderr.strip()}")
    run.cleanups.append(lambda: subprocess.run(["umount", "-l", str(target)], capture_output=True))


def _expect_save_failure(run: Run, launch: Launch, sent: float, *words: str) -> str:
    """Exit 6 soon after `sent`, the reason saying one of `words` (whichever write or check noticed first)."""
    rc = run.finish(launch, timeout=30)
    took = time.monotonic() - sent
    reason = finished(launch).get("reason", "")
    run.check(rc == 6, f"exit code {rc}, expected 6: {reason}")
    run.check(any(word in reason for word in words), f"the reason says none of {words}: {reason!r}")
    run.check(took < 10, f"took {took:.1f} s to stop")
    return f"{_fmt_exit(rc)} {took:.1f} s later: {reason}"


def disk_full(run: Run) -> str:
    run.save.mkdir()
    _mount(run, "-t", "tmpfs", "-o", f"size={'64m' if run.trainer == REAL else '8m'}", "tmpfs", target=run.save)
    script, args, env = _trainer(run, fake=["--hang", "--heartbeat", "0.2"])
    launch = run.start("--nproc", NPROC, "--grace", "10", script=script, script_args=args, env=env)
    run.wait_training(launch, 1)
    # Something else fills the disk (a dataset cache, another job's logs): 512 KiB stay free.
    stat = os.statvfs(run.save)
    room = stat.f_bavail * stat.f_frsize - 512 * 1024
    sent = time.monotonic()
    try:
        with open(run.save / "filler.bin", "wb") as handle:
            while room > 0:
                room -= handle.write(b"\0" * min(room, 1 << 20))
    except OSError:
        pass  # the trainer raced us to the last blocks: full either way
    return _expect_save_failure(run, launch, sent, "is full", "No space left")


def log_dir_full(run: Run) -> str:
    logs = run.root / "logs"
    logs.mkdir()
    _mount(run, "-t", "tmpfs", "-o", "size=512k", "tmpfs", target=logs)
    try:  # something else filled the --log-dir's disk before the start
        with open(logs / "filler.bin", "wb") as handle:
            while True:
                handle.write(b"\0" * 65536)
    except OSError:
        pass
    script, args, env = _trainer(run, fake=["--generations", "1"])
    launch = run.start("--nproc", NPROC, "--log-dir", str(logs), script=script, script_args=args, env=env)
    rc = run.finish(launch, timeout=60)
    reason = finished(launch).get("reason", "")
    run.check(rc == 6, f"exit code {rc}, expected 6: {reason}")
    run.check(f"--log-dir {logs} is full" in reason and "KiB free" in reason, f"the reason does not name the full "
              f"--log-dir disk: {reason!r}")
    run.check(not events(launch, "generation_started"), "a generation was started into the full disk")
    return f"{_fmt_exit(rc)}: {reason}"


def save_folder_read_only(run: Run) -> str:
    script, args, env = _trainer(run, fake=["--hang", "--heartbeat", "0.2"])
    launch = run.start("--nproc", NPROC, "--grace", "10", script=script, script_args=args, env=env)
    run.wait_training(launch, 1)
    # A read-only mount over the folder (root is not stopped by file modes): what an NFS server going
    # read-only, or a remount after a file-system error, looks like.
    _mount(run, "--bind", str(run.save), target=run.save)
    _mount(run, "-o", "remount,bind,ro", str(run.save), target=run.save)
    return _expect_save_failure(run, launch, time.monotonic(), "not writable", "Read-only file system")


def _preflight(run: Run, pai_args: list[str], script: Path | str, expect_in: str) -> str:
    before = tree_state(run.work)
    launch = run.start(*pai_args, script=Path(script))
    rc = run.finish(launch, timeout=30)
    lines = stderr_lines(launch)
    run.check(rc == 2, f"exit code {rc}, expected 2")
    run.check(len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {lines[:5]}")
    run.check(lines and expect_in in lines[0], f"the message does not mention {expect_in!r}: {lines[:1]}")
    run.check(tree_state(run.work) == before, "the working directory changed")
    started = run.tracker.descendants_seen(launch.pid)
    run.check(started == 0, f"{started} process(es) were started")
    return f"{_fmt_exit(rc)}: {lines[0] if lines else '(nothing on stderr)'}"


def grace_nan(run: Run) -> str:
    return _preflight(run, ["--nproc", NPROC, "--grace", "nan"], EXAMPLE, "--grace nan")


def unknown_option(run: Run) -> str:
    return _preflight(run, ["--nproc", NPROC, "--no-such-option"], EXAMPLE, "--no-such-option")


def missing_script(run: Run) -> str:
    return _preflight(run, ["--nproc", NPROC], "no_such_train.py", "no_such_train.py")


def nproc_zero(run: Run) -> str:
    return _preflight(run, ["--nproc", "0"], EXAMPLE, "--nproc 0")


def script_without_pai_flags(run: Run) -> str:
    launch = run.start("--nproc", NPROC, script=NO_PAI_FLAGS)
    rc = run.finish(launch, timeout=60)
    tail = (events(launch, "init_output_tail") or [{}])[0].get("tail", "")
    reason = finished(launch).get("reason", "")
    run.check(rc == 3, f"exit code {rc}, expected 3")
    run.check("unrecognized arguments: --perforate_model_parallel" in tail,
              f"the argparse error is not in the logged tail: {tail!r}")
    run.check(not events(launch, "generation_started"), "a generation was started")
    run.check("pai-launch doctor check flag-perforate-model-parallel" in reason,
              f"the run's reason does not name the doctor check that finds it: {reason!r}")
    error = next((line for line in tail.splitlines() if "error:" in line), tail[-120:])
    return f"{_fmt_exit(rc)}: {reason}; the init run said: {error}"


def ddp_rank_killed_in_collective(run: Run) -> str:
    launch = run.start("--nproc", NPROC, "--grace", "10", "--backoff", "0.5", script=DDP_SPIN_ONCE)
    run.wait(launch, lambda: (run.work / "results" / "spinning").exists(), "the ranks to spin in all_reduce")

    def rank1() -> psutil.Process | None:
        try:
            pid = int((run.work / "results" / "pid-rank1").read_text())
            return next(proc for proc in psutil.Process(launch.pid).children(recursive=True) if proc.pid == pid)
        except (OSError, ValueError, StopIteration, psutil.Error):
            return None

    victim = run.wait(launch, rank1, "rank 1's worker process", timeout=20)
    killed = time.monotonic()
    victim.kill()
    failed = run.wait(launch, lambda: events(launch, "generation_failed"), "the generation to be stopped", timeout=60)
    noticed = time.monotonic() - killed
    rc = run.finish(launch)
    run.check(noticed < 10, f"the generation took {noticed:.1f} s to end after the kill")
    run.check(failed[0].get("rank") == 1 and failed[0].get("exit") == "signal SIGKILL",
              f"root cause reported as rank {failed[0].get('rank')} {failed[0].get('exit')}")
    run.check(events(launch, "retry_scheduled"), "no retry was scheduled")
    run.check(rc == 0, f"exit code {rc}, expected 0 after the retry: {finished(launch).get('reason')}")
    return (f"rank 1 SIGKILLed in all_reduce: generation ended {noticed:.1f} s later, root cause "
            f"rank {failed[0].get('rank')} {failed[0].get('exit')}, retried; {_fmt_exit(rc)}")


def _agent_event(run: Run, launch: Launch, name: str, what: str) -> dict:
    return run.wait(launch, lambda: (events(launch, name) or [None])[0], what, timeout=45)


def agent_sigstopped(run: Run) -> str:
    # No --stall-timeout: only the agent's heartbeat can tell (bound shortened for the test).
    script, args, env = _trainer(run, fake=["--generations", "2", "--hang-generation", "1"])
    launch = run.start("--nproc", NPROC, "--backoff", "0.2", script=script, script_args=args,
                       env={**env, "PAI_LAUNCH_TEST_AGENT_SILENCE": "8"})
    run.wait_training(launch, 1)
    agent = psutil.Process(_agent_event(run, launch, "generation_started", "generation 1")["agent_pid"])
    stopped = time.monotonic()
    agent.send_signal(signal.SIGSTOP)
    rc = run.finish(launch)
    hung = events(launch, "agent_hung")
    retries = events(launch, "retry_scheduled")
    run.check(rc == 0, f"exit code {rc}, expected 0: {finished(launch).get('reason')}")
    run.check(len(hung) == 1 and hung[0].get("agent_pid") == agent.pid, f"agent_hung: {hung}")
    run.check(len(retries) == 1 and "stopped answering" in retries[0].get("reason", ""),
              f"retries: {[r.get('reason') for r in retries]}")
    agents = [e.get("agent_pid") for e in events(launch, "generation_started")]
    run.check(len(agents) == 2 and agents[1] != agent.pid, f"generation 2's agent: {agents}")
    took = hung[0].get("silent_s") if hung else None
    took_all = time.monotonic() - stopped
    return (f"agent found hung after {took} s without an answer, killed and replaced ({took_all:.0f} s from SIGSTOP "
            f"to the end); {_fmt_exit(rc)}")


def supervisor_paused(run: Run) -> str:
    stall, pause = 3.0, 7.0
    script, args, env = _trainer(run, fake=["--heartbeat", "0.3", "--train-seconds", "16", "--generations", "1"])
    launch = run.start("--nproc", NPROC, "--stall-timeout", str(stall), script=script, script_args=args, env=env)
    run.wait_training(launch, 1)
    latest = run.save / "latest.pt"
    run.wait(launch, latest.exists, "rank 0's first latest.pt")
    paused_at = time.time()
    launch.popen.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: latest.stat().st_mtime >= paused_at + pause, 30, message="the workers' writes meanwhile")
    finally:
        launch.popen.send_signal(signal.SIGCONT)
    rc = run.finish(launch)
    resumed = events(launch, "supervisor_resumed")
    run.check(rc == 0, f"exit code {rc}, expected 0: {finished(launch).get('reason')}")
    run.check(resumed, "no supervisor_resumed event")
    run.check(not events(launch, "stall_detected"), f"a false stall: {events(launch, 'stall_detected')}")
    run.check(run.signals() == {}, f"workers were signalled: {run.signals()}")
    paused = resumed[0].get("paused_s") if resumed else None
    return (f"paused {paused} s (--stall-timeout {stall:g}): save folder read again, no stall, no signal; "
            f"{_fmt_exit(rc)}")


def forkserver_killed(run: Run) -> str:
    script, args, env = _trainer(run, fake=["--generations", "2", "--hang-generation", "1"])
    launch = run.start("--nproc", NPROC, "--backoff", "0.2", script=script, script_args=args, env=env)
    run.wait_training(launch, 1)
    server = _agent_event(run, launch, "agent_ready", "the agent's forkserver")["forkserver_pid"]
    psutil.Process(server).send_signal(signal.SIGKILL)
    rc = run.finish(launch)
    failed = events(launch, "generation_failed")
    run.check(rc == 0, f"exit code {rc}, expected 0: {finished(launch).get('reason')}")
    error = failed[0].get("error", "") if failed else ""
    run.check(len(failed) == 1 and error.startswith("the warm workers' forkserver"), f"generation_failed: {failed}")
    run.check(events(launch, "forkserver_restarted"), "no forkserver_restarted event")
    return f"named: {error.split(',')[0]!r}; a new forkserver for generation 2; {_fmt_exit(rc)}"


@dataclass(frozen=True)
class Scenario:
    name: str
    expected: str
    body: Callable[[Run], str]
    #: The trainers it can run with, the fastest first: "fake", "real", or "none" (nothing is started).
    trainers: tuple[str, ...] = (FAKE, REAL)
    #: Needs torch whatever the trainer (real DDP workers).
    torch: bool = False
    fake_timeout: float = 60.0
    real_timeout: float = 240.0
    #: Why it cannot run on this machine (None: it can), asked just before running it.
    unavailable: Callable[[], str | None] = lambda: None

    def timeout(self, trainer: str) -> float:
        return self.real_timeout if trainer == REAL or self.torch else self.fake_timeout

    def trainer_for(self, prefer_real: bool) -> str:
        if prefer_real and REAL in self.trainers:
            return REAL
        return self.trainers[0]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("rank crash once", "a retry from the newest switch file, then exit 0", rank_crash_once),
    Scenario("rank crash every time", "exit 4 after 3 failed generations, naming the last failure",
             rank_crash_every_time),
    Scenario("crash before training", "stops after 2 identical failures with the worker's code 9",
             crash_before_training),
    Scenario("torn newest switch file", "switch_4.pt quarantined (kept), resume from switch_2.pt, exit 0", torn_switch),
    Scenario("every switch file garbage", "each moved aside, no progress counted: exit 4 after 3 generations",
             garbage_switches, trainers=(FAKE,)),
    Scenario("named pipe as state.json", "one line, exit 2, the pipe moved aside, nothing started", pipe_as_state_json,
             trainers=(FAKE,)),
    Scenario("stale completion marker", "exit 0, folder unchanged byte for byte, nothing started", stale_marker),
    Scenario("kill -9 mid-generation, restart", "nothing left within 2 s; the restart resumes (no init) and exits 0",
             kill9_then_resume),
    Scenario("SIGTERM mid-generation, restart", "exit 143 within the grace; the restart resumes and exits 0",
             sigterm_then_resume),
    Scenario("SIGTERM to pai-launch as PID 1", "exit 143 within grace + 2 s, the namespace empty", pid1_sigterm),
    Scenario("worker ignores SIGTERM", "exit 143, workers SIGKILLed at the 3 s grace", worker_ignores_sigterm,
             trainers=(FAKE,)),
    Scenario("ranks flood their output", "exit 0, each rank's last line relayed, skips said in one line",
             output_flood, trainers=(FAKE,)),
    Scenario("stderr's reader quits (2>&1 | head -1)", "the run completes, exit 0; console_lost in events.jsonl",
             log_reader_quits, trainers=(FAKE,)),
    Scenario("hung rank", "stall detected, SIGUSR1 (kills workers without a handler), retried as a stall, exit 0",
             hung_rank),
    Scenario("agent SIGSTOPped mid-generation (no --stall-timeout)",
             "agent_hung, killed and replaced, retried within the budget, exit 0", agent_sigstopped, trainers=(FAKE,),
             fake_timeout=90.0),
    Scenario("pai-launch SIGSTOPped past --stall-timeout", "no false stall, no signal to the workers, exit 0",
             supervisor_paused, trainers=(FAKE,)),
    Scenario("forkserver kill -9 mid-generation", "named as the forkserver's death, a new one, retried, exit 0",
             forkserver_killed, trainers=(FAKE,)),
    Scenario("second pai-launch, same folder", "the second exits 2 naming the first's PID; the first completes",
             second_launch),
    Scenario("another user squats the lock's socket name", "the run starts, logs save_lock_squatted naming the "
             "squatter; "
             "a second pai-launch still exits 2 naming the first's PID", lock_name_squatted, trainers=(FAKE,),
             unavailable=local_user_unavailable),
    Scenario("another user plants a link at the lock file", "one line, exit 2, nothing started, the link's target "
             "untouched", link_planted_in_save_folder, trainers=(FAKE,), unavailable=local_user_unavailable),
    Scenario("save folder removed mid-run (and re-created)",
             "exit 6, workers stopped, the end recorded in the new folder only once the script wrote there",
             save_folder_removed),
    Scenario("save folder's disk full", "exit 6 naming the full disk, workers stopped", disk_full,
             unavailable=mount_unavailable),
    Scenario("save folder turns read-only", "exit 6, workers stopped", save_folder_read_only,
             unavailable=mount_unavailable),
    Scenario("--log-dir's disk full", "exit 6 naming the full --log-dir disk and its free space, no generation started",
             log_dir_full, trainers=(FAKE,), unavailable=mount_unavailable),
    Scenario("unknown option", "one line, exit 2, nothing started or written", unknown_option, trainers=(NONE,)),
    Scenario("--grace nan", "one line naming --grace, exit 2, nothing started or written", grace_nan, trainers=(NONE,)),
    Scenario("missing script", "one line, exit 2, nothing started or written", missing_script, trainers=(NONE,)),
    Scenario("--nproc 0", "one line, exit 2, nothing started or written", nproc_zero, trainers=(NONE,)),
    Scenario("script without PerforatedAI flags", "exit 3 with the init run's argparse error shown",
             script_without_pai_flags,
             trainers=(NONE,)),
    Scenario("rank SIGKILLed in a collective (real DDP)", "generation stopped in seconds, retried, exit 0",
             ddp_rank_killed_in_collective, trainers=(REAL,), torch=True, real_timeout=180.0),
)


def execute(scenario: Scenario, trainer: str, root: Path) -> Result:
    """Run one scenario in `root` (made if needed) and judge it."""
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    why_not = scenario.unavailable()
    if why_not:
        return Result(scenario.name, trainer, scenario.expected, f"skipped: {why_not}", [], [], [], 0.0, root,
                      skipped=True)
    run = Run(root, trainer, scenario.timeout(trainer))
    outcome = ""
    try:
        outcome = scenario.body(run)
    except Exception as exc:  # noqa: BLE001 - a broken scenario is one failed row, not the end of the table
        run.problems.append(f"{type(exc).__name__}: {str(exc)[:3000]}")
        outcome = f"did not finish: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"
    finally:
        left, lost = run.close()
    return Result(scenario.name, trainer, scenario.expected, outcome, run.problems, left, lost,
                  time.monotonic() - started, root)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
