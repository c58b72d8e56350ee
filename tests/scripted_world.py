"""A run's world without processes: the init run and the agent are stand-ins that play a scripted history in this
process (writing the save folder as the script would, reporting through the table's callback as the real children
do), so the whole supervisor (runner, translator, machine, save session, process table) runs as in production,
in a fraction of a second per generation. What only processes show (signals, orphans, torch) stays in tests/proc.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import queue
import shutil
import signal
import sys
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from pai_launch.cli import startup
from pai_launch.core.observations import (
    AgentAnswered,
    AgentGone,
    AgentReported,
    AgentStarted,
    MarkerAppeared,
    ProcessExited,
    Role,
    SaveWritten,
    SignalReceived,
)
from pai_launch.linux import procs
from pai_launch.placement.spec import LaunchSpec
from pai_launch.supervise.children.spawn import Spawn
from pai_launch.supervise.loop.world import World, make_world
from pai_launch.wire.protocol import AgentReady, GenerationRequest, GenerationResult, WorkerFailure
from tests.helpers import FAKE_TRAINER, events_file, safetensors_bytes

#: Stand-ins' pids: above any kernel's pid_max, so a signal meant for one can never reach a real process.
_PIDS = itertools.count(10**8)


def checkpoint() -> bytes:
    """A whole switch file, as PerforatedAI writes one (safetensors)."""
    return safetensors_bytes(os.urandom(64))


def loads(path: Path) -> bool:
    """Whether a script could load this switch file: a whole safetensors file, or a whole zip (torch.save's form), as
    the fake trainer and the real library check them (not pai-launch's own check: this is what it must agree with)."""
    data = path.read_bytes()
    if zipfile.is_zipfile(io.BytesIO(data)):
        try:
            return zipfile.ZipFile(io.BytesIO(data)).testzip() is None
        except (zipfile.BadZipFile, OSError, EOFError):
            return False
    size = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    try:
        header = json.loads(data[8:8 + size]) if 0 <= size <= len(data) - 8 else None
        end = max(entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__")
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return 8 + size + end == len(data)


def torn() -> bytes:
    """A switch file cut short, as a kill mid-write leaves one."""
    return checkpoint()[:40]


@dataclass(frozen=True)
class Gen:
    """One generation as the agent plays it: the files rank 0 writes into the save folder (in order), then how it
    ends: every worker exits 0, some ranks fail (rank, exit code, log tail), or the agent itself dies (its exit
    code) without a result."""

    writes: tuple[tuple[str, bytes], ...] = ()
    failures: tuple[tuple[int, int, str], ...] = ()
    agent_dies: int | None = None
    #: Instead: the agent exits before it takes the request (exit code, the reason it gave), handing it back.
    agent_leaves: tuple[int, str] | None = None
    #: Once it ended (or, when it hangs, once its workers run), pai-launch receives this signal (as its handler queues
    #: one).
    then_signal: int | None = None
    #: After its writes, every rank hangs (a deadlocked collective) until a signal ends it: SIGTERM ends a rank
    #: unless `ignores_sigterm`; SIGUSR1 (the stack dump) ends it only where `dies_of_sigusr1`; SIGKILL always.
    hangs: bool = False
    ignores_sigterm: bool = False
    ignores_sigint: bool = False
    dies_of_sigusr1: bool = False
    #: A hanging rank that, stopped, crashes in its teardown instead: (rank, exit code, log tail).
    crashes_on_stop: tuple[int, int, str] | None = None
    #: More signals pai-launch receives right after `then_signal` (a second Ctrl-C).
    and_signals: tuple[int, ...] = ()
    #: Before its writes, rank 0 trains this long, rewriting latest.pt every `heartbeat` seconds (as each epoch does).
    trains_for: float = 0.0
    heartbeat: float = 0.2
    #: After its writes, the save folder goes: "removed" (by someone else, the run's own files with it), or "remade"
    #: (rank 0 removes it and makes a new one of that name, where it writes latest.pt).
    save_folder: str | None = None
    #: Once it ended, someone removes the save folder (while a retry waits).
    then_removed: bool = False


def play_writes(save_dir: Path, gen: Gen) -> None:
    for name, content in gen.writes:
        path = save_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    if gen.save_folder == "removed":
        shutil.rmtree(save_dir)
    elif gen.save_folder == "remade":  # the new folder is made while the old one still holds its inode
        save_dir.rename(save_dir.with_name(save_dir.name + ".removing"))
        save_dir.mkdir()
        shutil.rmtree(save_dir.with_name(save_dir.name + ".removing"))
        (save_dir / "latest.pt").write_bytes(checkpoint())


def switch(number: int) -> Gen:
    """A generation that ends at a restructure: switch_N.pt written, every worker exits 0."""
    return Gen(writes=((f"switch_{number}.pt", checkpoint()),))


def complete() -> Gen:
    """The last generation: rank 0 writes the completion marker."""
    return Gen(writes=((".training_complete", b"complete"),))


class ObservedInbox(queue.Queue):
    """The run's inbox, which also tells the scripted agent when the save folder's watcher has reported a file (a
    real generation ends well after its last write is seen). `lagging_watcher`: the watcher's reports of a
    generation's writes arrive only after its result, as on a loaded machine where the watcher's thread runs late."""

    def __init__(self, lagging_watcher: bool = False) -> None:
        super().__init__()
        #: Each file's latest report, by when the watcher made it.
        self._seen: dict[str, float] = {}
        self._changed = threading.Condition()
        self._lagging = lagging_watcher
        self._held: list = []

    def put(self, item, block: bool = True, timeout: float | None = None) -> None:
        name = item.name if isinstance(item, SaveWritten) else None
        if isinstance(item, MarkerAppeared):
            name = ".training_complete"
        if name is not None and self._lagging:
            self._held.append(item)
        else:
            super().put(item, block, timeout)
        if isinstance(item, AgentReported):
            held, self._held = self._held, []
            for late in held:
                super().put(late)
        if name is not None:
            with self._changed:
                self._seen[name] = item.now
                self._changed.notify_all()

    def wait_seen(self, names: list[str], since: float, timeout: float = 10.0) -> None:
        """Until the watcher has reported each of `names` as written at or after `since` (time.monotonic())."""
        with self._changed:
            self._changed.wait_for(lambda: all(self._seen.get(name, -1.0) >= since for name in names), timeout)


@dataclass
class _Exited:
    returncode: int

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode


class ScriptedPlain:
    """The init run: writes the settings an init run records, exits with `returncode`."""

    def __init__(self, world: ScriptedProcesses, role: Role, report) -> None:
        self.role, self.pid, self._world, self._report = role, next(_PIDS), world, report

    def start(self) -> ScriptedPlain:
        if self.role is Role.DATA_PARALLEL:  # one process plays the next generation: its first failure is its exit
            gen = self._world.next_generation(self._world.dp_runs)
            self._world.dp_runs += 1
            since = time.monotonic()
            play_writes(self._world.save_dir, gen)
            self._world.inbox.wait_seen([name for name, _ in gen.writes], since)
            code, tail = (gen.failures[0][1], gen.failures[0][2]) if gen.failures else (0, "")
            self._report(ProcessExited(self.role, code, tail, time.monotonic()))
            return self
        code, tail = self._world.init_exit
        save = self._world.save_dir
        if code == 0 and self._world.init_writes:
            if self._world.init_folder == "cleared":
                shutil.rmtree(save, ignore_errors=True)
            save.mkdir(exist_ok=True)
            (save / "array_dims.csv").write_text(".fc1,1,32\n")
            if self._world.init_folder == "replaced":
                save.rename(save.with_name(save.name + ".replaced"))
                save.mkdir()
                (save / "array_dims.csv").write_text(".fc1,1,32\n")
        self._world.inits += 1
        self._report(ProcessExited(self.role, code, tail, time.monotonic()))
        return self

    def processes(self) -> list:
        return []


@dataclass(eq=False)
class _Worker:
    """A hanging generation's rank, as the table sees it: a pid to signal, and its exit once one ends it."""

    rank: int
    pid: int
    code: int | None = None
    tail: str = ""


class ScriptedAgent:
    """The node's agent: ready at once, answers every ping, plays the next scripted generation for each request."""

    def __init__(self, world: ScriptedProcesses, report) -> None:
        self.pid, self._world, self._report = next(_PIDS), world, report
        self.facts = AgentReady(warm=False, why="--cold")
        self.started_at = time.monotonic()
        self.stop_raised = threading.Event()
        self.popen = _Exited(0)
        self._dead = False
        #: The generation whose workers hang: (request, its script, its workers).
        self._running: tuple[GenerationRequest, Gen, list[_Worker]] | None = None

    def start(self) -> ScriptedAgent:
        self._world.agents += 1
        self._world.started.append(self)
        self._report(AgentStarted(self.pid, self.facts, time.monotonic()))
        return self

    def run(self, request: GenerationRequest) -> None:
        self._world.requests.append(request)
        self._world.asked_at.append(time.monotonic())
        gen = self._world.next_generation()
        if gen.trains_for:  # in a thread of its own, as a real generation runs beside the loop
            threading.Thread(target=self._train_then_play, args=(request, gen), daemon=True).start()
            return
        self._play(request, gen)

    def _train_then_play(self, request: GenerationRequest, gen: Gen) -> None:
        until = time.monotonic() + gen.trains_for
        while time.monotonic() < until and not self._dead:
            (self._world.save_dir / "latest.pt").write_bytes(checkpoint())
            time.sleep(gen.heartbeat)  # the scripted epoch's length: what the test is about
        if not self._dead:
            self._play(request, gen)

    def _play(self, request: GenerationRequest, gen: Gen) -> None:
        why = self._world.load_error(request)
        if why is not None:  # every rank dies in its load, as the library does on a file it cannot load
            gen = Gen(failures=tuple((rank, 1, why) for rank in range(request.nproc)))
        if gen.agent_leaves is not None:
            code, why = gen.agent_leaves
            self._dead, self.popen = True, _Exited(code)
            self._report(AgentGone(self.pid, code, why, request, time.monotonic()))
            return
        since = time.monotonic()
        play_writes(self._world.save_dir, gen)
        if not self._world.inbox._lagging:
            self._world.inbox.wait_seen([name for name, _ in gen.writes], since)
        if gen.agent_dies is not None:
            self.die(gen.agent_dies)
            return
        if gen.hangs:
            self._running = (request, gen, [_Worker(rank, next(_PIDS)) for rank in range(request.nproc)])
            if gen.then_signal is not None:  # pai-launch is signalled while the workers hang
                for signum in (gen.then_signal, *gen.and_signals):
                    self._report(SignalReceived(signum, time.monotonic()))
            return
        failures = tuple(WorkerFailure(rank, code, 2000 + rank, tail, at=time.time() + rank / 1000)
                         for rank, code, tail in gen.failures)
        self._result(request, failures)
        if gen.then_signal is not None:
            self._report(SignalReceived(gen.then_signal, time.monotonic()))
        if gen.then_removed:
            shutil.rmtree(self._world.save_dir)

    def _result(self, request: GenerationRequest, failures: tuple[WorkerFailure, ...]) -> None:
        now = time.monotonic()
        self._world.ended_at.append(now)
        self._running = None
        self._report(AgentReported(self.pid, GenerationResult(request.generation, failures, log_dir=request.log_dir),
                                   None, now))

    def die(self, returncode: int) -> None:
        """The agent process ends (killed, or crashed) with its generation's workers: no result."""
        self._dead, self._running, self.popen = True, None, _Exited(returncode)
        self._report(AgentReported(self.pid, None, returncode, time.monotonic()))

    def hear(self, pid: int, signum: int) -> bool:
        """A signal for one of the hanging generation's workers: False when `pid` is none of them."""
        if self._running is None:
            return False
        request, gen, workers = self._running
        worker = next((w for w in workers if w.pid == pid and w.code is None), None)
        if worker is None:
            return False
        self._world.signals.append((request.generation, worker.rank, signal.Signals(signum).name, time.monotonic()))
        ends = (signum == signal.SIGTERM and not gen.ignores_sigterm
                or signum == signal.SIGINT and not gen.ignores_sigint
                or signum == signal.SIGUSR1 and gen.dies_of_sigusr1)
        if ends:
            crash = gen.crashes_on_stop
            worker.code, worker.tail = (crash[1], crash[2]) if crash and crash[0] == worker.rank else (-signum, "")
        if all(w.code is not None for w in workers):
            self._result(request, tuple(WorkerFailure(w.rank, w.code, w.pid, w.tail, at=time.time()) for w in workers
                                        if w.code != 0))
        return True

    def ping(self, now: float, every: float) -> None:
        if not self._dead:
            self._report(AgentAnswered(self.pid, now))

    def withdraw(self) -> bool:
        return False

    def stop_job(self, stop) -> None:
        self.stop_raised.set()

    def workers(self) -> list:
        return [w for w in self._running[2] if w.code is None] if self._running is not None else []

    def close(self) -> None:
        self._dead = True


@dataclass
class ScriptedProcesses:
    """The history a run plays: the init run's exit (code, output) and each generation in turn (a run that asks for
    more generations than the script has is a test's failure, said at once)."""

    save_dir: Path
    generations: list[Gen]
    inbox: ObservedInbox
    init_exit: tuple[int, str] = (0, "")
    #: The init run records its settings (array_dims.csv) in the save folder.
    init_writes: bool = True
    #: The init run first removes its save folder ("cleared"), or moves it aside to SAVE.replaced after writing and
    #: writes a new one ("replaced").
    init_folder: str | None = None
    requests: list[GenerationRequest] = field(default_factory=list)
    inits: int = 0
    agents: int = 0
    #: DataParallel processes started (each plays the next generation).
    dp_runs: int = 0
    #: (generation, rank, signal name, time.monotonic()) each time a hanging generation's worker was signalled.
    signals: list[tuple[int, int, str, float]] = field(default_factory=list)
    #: Every agent started, in order.
    started: list[ScriptedAgent] = field(default_factory=list)
    #: time.monotonic() of each request's arrival, and of each generation's result.
    asked_at: list[float] = field(default_factory=list)
    ended_at: list[float] = field(default_factory=list)

    def next_generation(self, index: int | None = None) -> Gen:
        index = len(self.requests) - 1 if index is None else index
        assert index < len(self.generations), \
            f"the run asked for generation {index + 1}; the script has {len(self.generations)}"
        return self.generations[index]

    def load_error(self, request: GenerationRequest) -> str | None:
        """What every rank dies of when the request resumes from the save folder and its newest switch file cannot be
        loaded: torn (no whole file), or whole but marked as not the model's (a size mismatch); None when it loads."""
        if "--pai_load_folder" not in request.args:
            return None
        names = sorted(self.save_dir.glob("switch_*.pt"), key=lambda path: int(path.stem.split("_")[1]))
        if not names:
            return None
        newest = names[-1]
        if not loads(newest):
            return f"SafetensorError: incomplete metadata, file not fully covered: {newest.name}"
        if b'"unloadable"' in newest.read_bytes()[:512]:
            return f"RuntimeError: Error(s) in loading state_dict: size mismatch ({newest.name})"
        return None

    def spawn(self) -> Spawn:
        return Spawn(plain=lambda role, command, env, report, live: ScriptedPlain(self, role, report).start(),
                     agent=lambda python, workdir, env, report, args, live: ScriptedAgent(self, report).start(),
                     signal=self.signal, kill=self.kill)

    def signal(self, pid: int, signum: int) -> bool:
        return any(agent.hear(pid, signum) for agent in self.started)

    def kill(self, descendants, spare: frozenset[int]) -> int:
        """SIGKILL for everything the run started: an agent with hanging workers dies with them."""
        killed = 0
        for agent in [agent for agent in self.started if agent._running is not None]:
            request, _, workers = agent._running
            alive = [worker for worker in workers if worker.code is None]
            self.signals.extend((request.generation, worker.rank, "SIGKILL", time.monotonic()) for worker in alive)
            agent.die(-signal.SIGKILL)
            killed += 1 + len(alive)
        return killed + descendants.kill_all(spare)

    def load_folders(self) -> list[str | None]:
        """What each generation was told to resume from (--pai_load_folder), None for a fresh start."""
        folders = []
        for request in self.requests:
            args = list(request.args)
            folders.append(args[args.index("--pai_load_folder") + 1] if "--pai_load_folder" in args else None)
        return folders


@dataclass
class Played:
    """A run that played its history: its exit code and the events its save folder recorded during it."""

    exit_code: int
    events: list[dict]
    processes: ScriptedProcesses

    def names(self) -> list[str]:
        return [event["event"] for event in self.events]

    def event(self, name: str) -> dict:
        found = [event for event in self.events if event["event"] == name]
        assert found, f"no {name} event in {self.names()}"
        return found[-1]

    def all(self, name: str) -> list[dict]:
        return [event for event in self.events if event["event"] == name]

    def state(self) -> dict:
        """SAVE/.pai-launch/state.json as the run left it."""
        return json.loads((self.processes.save_dir / ".pai-launch" / "state.json").read_text())

    def retry_gaps(self) -> list[float]:
        """Seconds from each failed generation's result to the next request (the backoff counts from there)."""
        ended, asked = self.processes.ended_at, self.processes.asked_at
        return [asked[index + 1] - ended[index] for index in range(len(ended)) if index + 1 < len(asked)]


def console_events(capsys) -> dict[str, dict]:
    """The events a played run logged on its console (stderr, JSON lines), by name (the last of each): the record where
    no save folder was written."""
    said = {}
    for line in capsys.readouterr().err.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            said[event["event"]] = event
    return said


def own_world(spec: LaunchSpec, env: dict[str, str], inbox) -> World:
    """The run's real world, around the run alone: this test process's other children (a shared cluster's servers,
    a test's own helpers) are not the run's to signal or sweep."""
    return make_world(spec, env, inbox, others=procs.own_descendants())


def play(tmp_path: Path, generations: list[Gen], *, init_exit: tuple[int, str] = (0, ""), init_writes: bool = True,
         init_folder: str | None = None, lagging_watcher: bool = False, script_saves: str | None = None,
         env: dict[str, str] | None = None, **spec_fields) -> Played:
    """Run the supervisor in this process on `tmp_path` (its working directory, ./PAI its save folder) against the
    scripted history, from where the command line hands over (startup.launch_run: the adopted folder, --fresh, an
    already complete folder, then the run); no process is started. `script_saves`: the folder the script really
    writes (its own --save), when not the save folder pai-launch is given; `env`: variables pai-launch finds set
    (systemd's); `spec_fields`: the command line's settings (LaunchSpec's fields)."""
    # As on the command line: --max-failures given is a request for retries (the same crash too).
    defaults = {"nproc": 2, "log_format": "json", "backoff": 0.05, "backoff_max": 0.05, "doctor": False,
                "retries_requested": "max_failures" in spec_fields}
    spec = LaunchSpec(script=FAKE_TRAINER, workdir=tmp_path, python=sys.executable, **{**defaults, **spec_fields})
    env = {**{key: value for key, value in os.environ.items() if not key.startswith("PAI_LAUNCH_")}, **(env or {})}
    inbox = ObservedInbox(lagging_watcher)
    processes = ScriptedProcesses(tmp_path / (script_saves or spec.save_name), list(generations), inbox, init_exit,
                                  init_writes, init_folder)
    events_path = processes.save_dir / ".pai-launch" / "events.jsonl"
    earlier = len(events_file(events_path)) if events_path.is_file() and not spec.fresh else 0  # an earlier run's
    code = startup.launch_run(spec, env, (), inbox, others=procs.own_descendants(), spawn=processes.spawn())
    events = events_file(events_path)[earlier:] if events_path.is_file() else []  # none where no folder was made
    return Played(code, events, processes)
