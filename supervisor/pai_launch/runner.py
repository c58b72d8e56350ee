"""The one impure loop: execute the machine's actions, turn what happens into events, feed them back.

Everything that decides lives in machine.py; this module starts and signals processes, reads the
save folder, keeps pai-launch's state file and logs. Whatever happens, leaving run() leaves no
process of ours behind.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from pai_launch import checkpoint, exitcodes, logs, machine, plan, procs, savedir
from pai_launch.children import Agent, PlainProcess
from pai_launch.config import LaunchSpec, physical_gpu_count, visible_gpus
from pai_launch.protocol import GenerationRequest, GenerationResult
from pai_launch.state import NodeLock, RunState, StateError, StateStore, fingerprint, fingerprint_differences
from pai_launch.watcher import SaveFolderWatcher, SaveWritten

TICK = 0.2
#: On a machine with no spare core, start the next generation's agent only once workers are past start-up.
STANDBY_DELAY = 4.0
FINAL_SWEEP_TIMEOUT = 2.0
_RUNNING = (machine.Phase.INIT, machine.Phase.TRAINING)
LOG_ROOT_PREFIX = "pai-launch-logs-"


def remove_stale_log_roots() -> None:
    """Private log folders of pai-launch processes that were killed (kill -9 skips our cleanup)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{LOG_ROOT_PREFIX}*-*"):
        pid = folder.name[len(LOG_ROOT_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)) and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class _PlainExited:
    kind: str  # "init" or "train"
    returncode: int
    log_tail: str


@dataclass(frozen=True)
class _AgentDone:
    agent_pid: int
    result: GenerationResult | None
    returncode: int


class Runner:
    def __init__(self, spec: LaunchSpec, inbox: queue.SimpleQueue, log, env: dict[str, str] | None = None) -> None:
        self.spec = spec
        self.inbox = inbox
        self.env = dict(os.environ if env is None else env)
        self.visible = visible_gpus(self.env, spec.gpus, physical_gpu_count())
        self.policy = machine.Policy(
            grace=spec.grace, data_parallel=spec.data_parallel, max_failures=spec.max_failures,
            backoff_initial=spec.backoff, backoff_max=spec.backoff_max, stall_timeout=spec.stall_timeout,
            stall_dump_wait=min(5.0, spec.grace),
        )
        self.store = StateStore(spec.save_dir)
        self.fingerprint = fingerprint(spec.workdir / spec.script, spec.script_args, spec.nproc)
        self.previous = self.store.load()  # StateError: unreadable state, reported by the caller
        if self.previous is not None and self.previous.fingerprint != self.fingerprint:
            changes = "; ".join(fingerprint_differences(self.previous.fingerprint, self.fingerprint))
            raise StateError(
                f"{spec.save_dir} holds a run of another command ({changes}): run the same command to resume it, "
                f"or add --fresh to move {spec.save_name} aside and start over"
            )
        previous_id = self.previous.run_id if self.previous else None
        self.run_id = self.env.get(plan.RUN_ID_ENV) or previous_id or plan.new_run_id(self.env)
        self.log = log.bind(run_id=self.run_id)
        self.save_name = self.previous.save_name if self.previous else spec.save_name
        self.lock = NodeLock(spec.save_dir)
        self.record = self.previous or RunState(fingerprint=self.fingerprint, run_id=self.run_id, save_name=self.save_name)
        self.record.run_id = self.run_id
        self.descendants = procs.Descendants()
        self.plain: PlainProcess | None = None
        self.agent: Agent | None = None
        self.standby: Agent | None = None
        self.watcher: SaveFolderWatcher | None = None
        self.switches_before: savedir.SwitchSnapshot = {}
        self.phase_started = time.monotonic()
        self.init_started_wall = 0.0
        self.stop_signal: int | None = None
        self.stop_signalled: set[int] = set()
        self.announced: set[str] = set()
        self.reached_training = False
        self.save_lost_reported = False
        self.own_log_root = spec.log_dir is None
        #: Made in run(), not here: --dry-run builds a Runner too and must write nothing.
        self.log_root: Path | None = spec.log_dir
        self.generation = self.record.generation
        self.marker_seen = False
        self.next_tick = time.monotonic() + TICK
        #: (st_dev, st_ino) of the save folder once run() has made it: a removed and re-created folder differs.
        self.save_identity: tuple[int, int] | None = None

    @property
    def save_dir(self) -> Path:
        return self.spec.workdir / self.save_name

    def needs_init(self) -> bool:
        if self.spec.reinit or not savedir.has_init_outputs(self.save_dir):
            return True
        return not (self.record.init_done or savedir.has_switches(self.save_dir))

    def run(self) -> int:
        self.lock.acquire()  # StateError when another pai-launch holds this save folder
        self.save_identity = _identity(self.save_dir)
        procs.become_subreaper()
        if self.log_root is None:
            remove_stale_log_roots()
            self.log_root = Path(tempfile.mkdtemp(prefix=f"{LOG_ROOT_PREFIX}{os.getpid()}-"))
        logs.record_events_to(self.store.events_path)
        started = time.monotonic()
        state, actions = machine.start(needs_init=self.needs_init(), generation=self.record.generation,
                                       failures=self.record.failures, now=started)
        self.log.info("run_started", script=str(self.spec.script), nproc=self.spec.nproc, save_folder=str(self.save_dir),
                      mode="data_parallel" if self.spec.data_parallel else "ddp", pid=os.getpid(),
                      resumed=self.previous is not None, generation=self.record.generation, failures=self.record.failures)
        self.save_state()
        try:
            while True:
                for action in actions:
                    if isinstance(action, machine.Finish):
                        return self.finish(action, state, started)
                    getattr(self, f"execute_{type(action).__name__}")(action)
                event = self.next_event(state)
                state, actions = machine.step(self.policy, state, event)
                self.record.failures = state.failures
        finally:
            self.cleanup()

    def finish(self, action: machine.Finish, state: machine.State, started: float) -> int:
        log = self.log.info if action.exit_code == 0 else self.log.error
        log("run_finished", exit_code=action.exit_code, reason=action.reason, generations=state.generation,
            duration_s=round(time.monotonic() - started, 2))
        self.record.last_exit = {"code": action.exit_code, "reason": action.reason}
        self.save_state()
        return action.exit_code

    def save_state(self) -> None:
        """Persist the counters; a failure to write is the save folder failing, reported as such."""
        if self.save_replaced():
            return  # our folder was removed: never write our state into whatever now has its name
        self.record.generation = self.generation
        self.record.save_name = self.save_name
        try:
            self.store.save(self.record)
        except OSError as exc:
            self.report_save_lost(f"cannot write {self.store.state_path}: {exc.strerror or exc}")

    def save_replaced(self) -> bool:
        """The save folder we started with is gone, even if a new folder of that name took its place
        (PerforatedAI's next save re-creates a removed save folder within moments)."""
        return self.save_identity is not None and _identity(self.save_dir) != self.save_identity

    def save_problem(self) -> str | None:
        problem = savedir.health_problem(self.save_dir)
        if problem is None and self.save_replaced():
            problem = f"the save folder {self.save_dir} was removed (a new folder of that name has taken its place)"
        return problem

    def report_save_lost(self, reason: str) -> None:
        if not self.save_lost_reported:
            self.save_lost_reported = True
            self.inbox.put(machine.SaveFolderLost(reason, time.monotonic()))

    # --- events -----------------------------------------------------------------------------
    def next_event(self, state: machine.State) -> machine.Event:
        while True:
            # A Tick every TICK seconds even while events keep coming (a worker writing to the save folder
            # non-stop): deadlines (grace, stall, backoff) and housekeeping (reaping) must not starve.
            now = time.monotonic()
            if now >= self.next_tick:
                self.next_tick = now + TICK
                self.housekeeping(state)
                return machine.Tick(time.monotonic())
            try:
                raw = self.inbox.get(timeout=self.next_tick - now)
            except queue.Empty:
                continue
            if isinstance(raw, SaveWritten):
                self.on_save_written(raw)
                return machine.SaveActivity(raw.now)
            if isinstance(raw, _PlainExited):
                return self.on_plain_exited(raw)
            if isinstance(raw, _AgentDone):
                if self.agent is not None and raw.agent_pid == self.agent.pid:
                    return self.on_agent_done(raw)
                continue
            if isinstance(raw, machine.SignalReceived):
                self.log.warning("signal_received", signal=signal.Signals(raw.signum).name, phase=state.phase.value)
            elif isinstance(raw, machine.MarkerAppeared) and not self.marker_seen:
                self.marker_seen = True
                self.log.info("completion_marker_seen", generation=self.generation, grace_s=self.spec.grace)
            elif isinstance(raw, machine.SaveFolderLost):
                self.log.error("save_folder_failed", reason=raw.reason)
            return raw

    def housekeeping(self, state: machine.State) -> None:
        self.descendants.refresh()
        own = {child.pid for child in (self.plain, self.agent, self.standby) if child is not None}
        self.descendants.reap_adopted(own)
        if self.stop_signal is not None:
            self.signal_run(self.stop_signal, only_new=True)
        if state.phase in (machine.Phase.TRAINING, machine.Phase.BACKOFF):
            problem = self.save_problem()
            if problem:
                self.report_save_lost(problem)
        if self.standby_due(state):
            self.start_standby()

    def standby_due(self, state: machine.State) -> bool:
        if self.spec.data_parallel or self.standby is not None or state.phase not in (*_RUNNING, machine.Phase.BACKOFF):
            return False
        spare_cores = (os.cpu_count() or 1) > self.spec.nproc + 1
        return spare_cores or state.phase is not machine.Phase.TRAINING or time.monotonic() - self.phase_started >= STANDBY_DELAY

    def on_save_written(self, event: SaveWritten) -> None:
        if not savedir.is_startup_file(event.name):
            self.reached_training = True
        number = savedir.switch_number(event.name)
        if number is not None and event.name not in self.announced:
            self.announced.add(event.name)
            self.log.info("dendrites_added", switch=number, file=event.name, generation=self.generation)

    def on_plain_exited(self, raw: _PlainExited) -> machine.Event:
        now = time.monotonic()
        duration = round(now - self.phase_started, 2)
        self.plain = None
        if raw.kind == "init":
            log = self.log.info if raw.returncode == 0 else self.log.error
            log("init_exited", exit=exitcodes.describe_returncode(raw.returncode), duration_s=duration)
            if raw.returncode != 0:
                self.log.error("init_output_tail", tail=raw.log_tail)
                return machine.InitExited(raw.returncode, raw.log_tail, now=now)
            return self.check_init_outputs(now)
        failures = () if raw.returncode == 0 else (machine.Failure(0, raw.returncode, raw.log_tail),)
        complete = savedir.marker_mtime(self.save_dir) is not None
        self.log_generation_end(duration, failures, None, complete=complete)
        return machine.GenerationEnded(failures=failures, complete=complete, reached_training=self.reached_training, now=now)

    def check_init_outputs(self, now: float) -> machine.InitExited:
        """Find where the init run really saved: --save-name, or a folder the script chose itself."""
        since = self.init_started_wall - 1.0
        output = self.save_dir / savedir.INIT_OUTPUT
        if output.is_file() and output.stat().st_mtime >= since:
            self.init_done()
            return machine.InitExited(0, now=now)
        found = [folder for folder in savedir.find_init_outputs(self.spec.workdir, since) if folder != self.save_dir]
        if not found:
            return machine.InitExited(0, outputs_missing=True, now=now)
        actual = os.path.relpath(found[-1], self.spec.workdir)
        if self.spec.save_name_given:
            conflict = (f"the init run wrote its settings to {actual}/, not to --save-name {self.spec.save_name}: "
                        f"pass --save-name {actual} (or make the script save to {self.spec.save_name})")
            return machine.InitExited(0, save_conflict=conflict, now=now)
        self.log.warning("save_folder_adopted", save_folder=actual, instead_of=self.spec.save_name,
                         hint=f"the script saves to {actual}; pass --save-name {actual} to say so")
        self.adopt(actual)
        self.init_done()
        return machine.InitExited(0, now=now)

    def adopt(self, name: str) -> None:
        """Move our lock and state into the folder the script really uses; remove what we made in the other."""
        old_dir, old_store, old_lock = self.save_dir, self.store, self.lock
        self.save_name = name
        self.store = StateStore(self.save_dir)
        self.lock = NodeLock(self.save_dir)
        self.lock.acquire()
        self.save_identity = _identity(self.save_dir)
        if old_store.events_path.exists():
            shutil.move(str(old_store.events_path), self.store.events_path)
        logs.record_events_to(self.store.events_path)
        old_lock.release()
        for leftover in (old_store.state_path, old_lock.path):
            leftover.unlink(missing_ok=True)
        for folder in (old_store.folder, old_dir):
            try:
                folder.rmdir()  # only if empty: it was made by us for our state
            except OSError:
                break

    def init_done(self) -> None:
        self.record.init_done = True
        self.save_state()

    def on_agent_done(self, raw: _AgentDone) -> machine.Event:
        now = time.monotonic()
        duration = round(now - self.phase_started, 2)
        self.agent = None
        result = raw.result
        if result is None:
            error = f"agent process ended with {exitcodes.describe_returncode(raw.returncode)} before reporting a result"
            failures: tuple[machine.Failure, ...] = ()
        else:
            error = result.error
            failures = tuple(machine.Failure(f.rank, f.returncode, f.log_tail) for f in result.failures)
        progressed = tuple(savedir.changed_switches(self.switches_before, savedir.snapshot_switches(self.save_dir)))
        complete = savedir.marker_mtime(self.save_dir) is not None
        self.log_generation_end(duration, failures, error, progressed=progressed, complete=complete)
        if progressed:
            self.record.last_switch = progressed[-1]
        return machine.GenerationEnded(failures=failures, error=error, complete=complete, progressed=progressed,
                                       reached_training=self.reached_training or bool(progressed), now=now)

    def log_generation_end(self, duration: float, failures, error, *, progressed=(), complete=False) -> None:
        fields = dict(generation=self.generation, duration_s=duration, complete=complete, switch_files=list(progressed))
        if failures:
            first = failures[0]
            self.log.error("generation_failed", **fields, rank=first.rank, exit=exitcodes.describe_returncode(first.returncode),
                           failed_ranks=[f.rank for f in failures], reached_training=self.reached_training)
            if first.log_tail:
                self.log.error("worker_log_tail", rank=first.rank, tail=first.log_tail)
        elif error:
            self.log.error("generation_failed", **fields, error=error)
        else:
            self.log.info("generation_ended", **fields, exit="all workers exited 0")

    # --- actions ------------------------------------------------------------------------------
    def execute_StartInit(self, action: machine.StartInit) -> None:
        command = plan.init_command(self.spec, self.run_id, self.visible)
        self.init_started_wall = time.time()
        self.phase_started = time.monotonic()
        self.plain = PlainProcess(command, self.env, lambda rc, tail: self.inbox.put(_PlainExited("init", rc, tail)))
        self.log.info("init_started", pid=self.plain.pid, command=" ".join(command.argv[1:]))

    def execute_StartGeneration(self, action: machine.StartGeneration) -> None:
        self.generation = action.generation
        self.phase_started = time.monotonic()
        self.announced.clear()
        self.reached_training = False
        self.save_state()
        problem = self.save_problem()
        if problem:
            self.report_save_lost(problem)
            self.inbox.put(_PlainExited("train", 0, "not started"))
            return
        load_folder = self.resume_folder()
        self.start_watcher()  # both modes: stall detection and "reached training" rely on seeing the writes
        if self.spec.data_parallel:
            command = plan.data_parallel_command(self.spec, self.run_id, load_folder)
            self.plain = PlainProcess(command, self.env, lambda rc, tail: self.inbox.put(_PlainExited("train", rc, tail)))
            self.log.info("training_started", mode="data_parallel", pid=self.plain.pid)
            return
        self.switches_before = savedir.snapshot_switches(self.save_dir)
        warm = self.standby is not None
        agent = self.standby or Agent(self.spec.python, self.spec.workdir, self.env)
        self.standby = None
        self.agent = agent
        request = GenerationRequest(
            generation=action.generation,
            nproc=self.spec.nproc,
            python=self.spec.python,
            args=plan.worker_args(self.spec, load_folder),
            env=plan.generation_env(self.spec, self.run_id, action.generation, self.env),
            log_dir=str(self.log_root / f"generation-{action.generation}"),
            grace=self.spec.grace,
            elastic_run_id=plan.new_elastic_run_id(self.run_id, action.generation),
        )
        agent.run(request, lambda result, rc, pid=agent.pid: self.inbox.put(_AgentDone(pid, result, rc)))
        self.log.info("generation_started", generation=action.generation, nproc=self.spec.nproc, load_folder=load_folder,
                      agent_pid=agent.pid, warm_agent=warm)

    def resume_folder(self) -> str | None:
        """--pai_load_folder's value: the save folder once its newest switch file is whole (torn ones quarantined)."""
        had_switches = savedir.has_switches(self.save_dir)

        def quarantined(name: str, problem: str, moved: Path) -> None:
            self.log.warning("checkpoint_quarantined", file=name, problem=problem, moved_to=str(moved))

        newest = checkpoint.newest_valid_switch(self.save_dir, quarantined)
        if newest is None:
            if had_switches:
                self.log.warning("resuming_from_scratch", reason="no valid switch_*.pt left; starting after the init run")
            return None
        return self.save_name

    def execute_SignalRun(self, action: machine.SignalRun) -> None:
        if action.signum in machine.STOP_SIGNALS:
            self.stop_signal = action.signum
            self.stop_signalled.clear()
        targets = self.signal_run(action.signum, only_new=False)
        self.log.info("signal_forwarded", signal=signal.Signals(action.signum).name, pids=targets)

    def execute_KillRun(self, action: machine.KillRun) -> None:
        count = self.descendants.kill_all()
        if self.standby is not None:
            # The standby agent was killed with the rest: a retry (after a stall) must not hand it the next generation.
            self.standby.discard()
            self.standby = None
        self.log.warning("run_killed", processes=count)

    def execute_ScheduleRetry(self, action: machine.ScheduleRetry) -> None:
        self.stop_signal = None
        self.record.failures = action.failures
        self.record.last_exit = {"code": None, "reason": action.reason}
        self.save_state()
        self.log.warning("retry_scheduled", delay_s=action.delay, failures=action.failures,
                         max_failures=self.spec.max_failures, reason=action.reason)

    def execute_ReportStall(self, action: machine.ReportStall) -> None:
        self.log.error("stall_detected", generation=self.generation, idle_s=round(action.idle, 1),
                       action=f"sending SIGUSR1, then stopping the workers in {self.policy.stall_dump_wait:.0f} s")

    # --- helpers ------------------------------------------------------------------------------
    def run_processes(self) -> list[int]:
        """The processes a signal for "the run" goes to: the init/DataParallel process, or the agent's workers."""
        if self.plain is not None:
            return [self.plain.pid]
        if self.agent is None:
            return []
        try:
            return [child.pid for child in psutil.Process(self.agent.pid).children()]
        except psutil.Error:
            return []

    def signal_run(self, signum: int, *, only_new: bool) -> list[int]:
        sent = []
        for pid in self.run_processes():
            if only_new and pid in self.stop_signalled:
                continue
            if procs.signal_group(pid, signum) or procs.signal_pid(pid, signum):
                sent.append(pid)
            if signum == self.stop_signal:
                self.stop_signalled.add(pid)
        return sent

    def start_standby(self) -> None:
        self.standby = Agent(self.spec.python, self.spec.workdir, self.env)
        self.descendants.refresh()

    def start_watcher(self) -> None:
        if self.watcher is None and self.save_dir.is_dir():
            self.watcher = SaveFolderWatcher(self.save_dir, self.inbox, poll=self.spec.poll)
            self.watcher.start()

    def cleanup(self) -> None:
        """Leave nothing behind: stop watching, drop the standby agent, kill and reap every descendant."""
        if self.watcher is not None:
            self.watcher.stop()
        if self.standby is not None:
            self.standby.discard()
            self.standby = None
        self.descendants.refresh()
        if self.descendants.alive():
            killed = self.descendants.kill_all()
            survivors = self.descendants.wait_gone(FINAL_SWEEP_TIMEOUT)
            self.log.info("leftovers_killed", processes=killed, survivors=[p.pid for p in survivors])
        self.descendants.reap_adopted(set())
        logs.record_events_to(None)
        self.lock.release()
        if self.own_log_root and self.log_root is not None:
            shutil.rmtree(self.log_root, ignore_errors=True)


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino
