"""The one impure loop: turn what happens into events, feed them to the state machine, carry out its actions.

Decisions are machine.py's; what each action does is effects.py's; the save folder is session.py's; processes
are proctable.py's. This is also the exit-code boundary of a run: whatever goes wrong in here, run() returns a
documented exit code and leaves no process of ours behind.
"""

from __future__ import annotations

import os
import queue
import signal
import time
import traceback
from dataclasses import replace

from pai_launch.core import exitcodes, machine
from pai_launch.core.events import Began, Resumed, SaveFolderLost, Tick
from pai_launch.core.reports import phase_status
from pai_launch.placement.spec import LaunchSpec, policy_for
from pai_launch.savefmt import savedir
from pai_launch.savefmt.record import StateError
from pai_launch.supervise.children import coordination
from pai_launch.supervise.children.agent_process import AGENT_SLOW_START, AGENT_SLOW_START_TEST_ENV, slow_start_due
from pai_launch.supervise.folder.session import SaveSession
from pai_launch.supervise.job import plan
from pai_launch.supervise.loop.effects import EFFECTS, Effects
from pai_launch.supervise.loop.endings import Endings
from pai_launch.supervise.loop.translator import InternalError, Translator
from pai_launch.supervise.loop.world import World
from pai_launch.supervise.outputs import console, logs
from pai_launch.supervise.outputs.runviews import RunViews
from pai_launch.wire import jobsecret, log_events

TICK = 0.2
#: A loop that ticked this much later than TICK was not running (pai-launch was paused): Resumed, not Tick.
PAUSED_AFTER = 5.0


class Runner:
    def __init__(self, spec: LaunchSpec, session: SaveSession, inbox: queue.SimpleQueue, env: dict[str, str],
                 visible: tuple[str, ...], world: World, job: coordination.Job | None = None,
                 notes: list[tuple[str, dict]] = ()) -> None:
        """`world`: the process table and notifier the run acts on (world.make_world); `job`: a multi-node job's
        store (node 0 serves it, the others watch it; closed when the run ends); `notes`: warnings for the log
        (doctor's findings), as (event, fields)."""
        self.notes = list(notes)
        self.spec, self.session, self.inbox, self.env, self.visible = spec, session, inbox, env, visible
        self.policy = policy_for(spec, os.environ)
        self.world, self.notifier, self.table = world, world.notifier, world.table
        self.state = machine.start(**session.carried_over())
        self.next_tick = 0.0
        #: When the last Tick (or Resumed) was made: a much later one means the loop did not run meanwhile.
        self.last_tick: float | None = None
        self.job = job
        self.store_host = job.host if job is not None else None
        #: Made once the save folder is taken (run()): they write into it.
        self.views: RunViews | None = None
        self.log = None
        self.translator: Translator | None = None
        self.endings: Endings | None = None
        self.effects: Effects | None = None
        #: Agent pid -> how often it was reported not ready yet; when that is first said (seconds).
        self.slow_told: dict[int, int] = {}
        self.slow_start_after = seconds_from(os.environ.get(AGENT_SLOW_START_TEST_ENV), AGENT_SLOW_START)

    def run(self) -> int:
        """Supervise the run to its end; StateError (the folder is another pai-launch's) before anything starts."""
        try:
            # The save folder is written only once an init run has shown where the script saves (and whether it
            # clears its folder first); node 0 of a job takes it at once, for the token the other nodes look for.
            self.session.acquire(defer=self.session.needs_init() and not self.spec.nodes.multi)  # StateError propagates
        except StateError:
            if self.job is not None:
                self.job.close()
            raise
        self.views = RunViews(self.spec, lambda: self.session.save_dir)
        self.table.live = self.views.line
        self.log = logs.make_logger(self.spec.log_format, stream=self.views.stream, events=self.session.events,
                                    extra=tuple(self.views.processors)).bind(run_id=self.session.run_id)
        if self.spec.nodes.multi:
            self.log = self.log.bind(node=self.spec.nodes.node_rank)  # several nodes may log to one file (Slurm's)
        console.watch(self.console_lost)
        squatted = self.session.lock.squatted
        if squatted:
            self.log.warning(log_events.SAVE_LOCK_SQUATTED, **squatted, hint="another user's socket holds the name of "
                             "the save "
                             "folder's path lock; it is ignored, and the lock file alone keeps a second pai-launch out")
        try:
            self.table.open(self.session.run_id)
            if self.job is not None:
                self.table.spare(self.job.pid)
                self.job.start_watching(self.inbox.put)
            if self.store_host is not None:
                try:
                    self.store_host.publish_token(self.session.save_dir)
                except jobsecret.SecretError as exc:
                    self.log.error(log_events.JOB_SETUP_FAILED, error=str(exc))
                    return exitcodes.USAGE
            self.endings = Endings(lambda: self.session.save_dir, self.spec.restructure, self.log, self.notifier)
            self.translator = Translator(self.session, self.table.log_root, self.log, self.notifier, self.endings)
            self.effects = Effects(self.spec, self.session, self.world, self.inbox, self.log, env=self.env,
                                   visible=self.visible, policy=self.policy, store_host=self.store_host,
                                   started=time.monotonic(), endings=self.endings)
            return self.supervise()
        except Exception as exc:  # the boundary: a bug ends the run with a documented code, not a traceback
            return self.internal_error(exc)
        finally:
            try:
                if self.job is not None:
                    self.job.close()
                killed, survivors = self.table.close()
                if killed:
                    self.log.info(log_events.LEFTOVERS_KILLED, processes=killed, survivors=survivors)
            finally:
                console.watch(None)
                self.session.close()
                self.notifier.close()
                self.views.close()

    def supervise(self) -> int:
        self.inbox.put(Began(self.session.needs_init(), time.monotonic()))  # behind any signal already queued
        self.announce_start()
        while True:
            self.state, actions = machine.step(self.policy, self.state, self.next_event())
            self.record_step(self.state)
            for action in actions:
                exit_code = EFFECTS[type(action)](self.effects, action, self.state)
                if exit_code is not None:
                    return exit_code
            if self.table.run_started():
                self.notifier.ready()  # once: the first process of the run is running

    def announce_start(self) -> None:
        """What the run starts with, said once: the job's shape, the run, the warnings it starts with."""
        if self.spec.slurm_job_id is not None:
            self.log.info(log_events.SLURM_JOB, job_id=self.spec.slurm_job_id,
                          restart_count=self.spec.slurm_restart_count,
                          requeue_on=signal.Signals(self.spec.requeue_on).name if self.spec.requeue_on else None)
        if self.spec.nodes.multi:
            self.log.info(log_events.JOB_NODES, nodes=self.spec.nodes.describe(),
                          job_id=plan.job_id(self.spec, self.session.run_id),
                          serving_store=self.store_host is not None,
                          store_backend=self.store_host.backend if self.store_host is not None else None)
        self.log.info(log_events.RUN_STARTED, script=str(self.spec.script), nproc=self.spec.nproc,
                      save_folder=str(self.session.save_dir),
                      mode="data_parallel" if self.spec.data_parallel else "ddp", pid=os.getpid(),
                      resumed=self.session.previous is not None, generation=self.state.generation,
                      failures=self.state.failures)
        self.views.start(self.log)
        for event, fields in self.notes:
            self.log.warning(event, **fields)
        self.record()

    def record_step(self, state: machine.State) -> None:
        """Where a step of the machine left the run, recorded: in the save folder's state.json, and for systemd."""
        self.record()
        self.notifier.report(phase_status(state, self.policy, self.endings.dendrites),
                             stopping=state.phase in (machine.Phase.STOPPING, machine.Phase.DONE))

    def console_lost(self, stream: str, error: str) -> None:
        """Our stdout or stderr went away (a closed terminal, a reader that quit, a full disk): the run goes on, its
        events file the record; said there once per stream (never on the console, which would fail again)."""
        events = self.session.events
        if events is not None:
            events(None, "warning", {"event": log_events.CONSOLE_LOST, "stream": stream, "error": error,
                                     "run_id": self.session.run_id,
                                     "hint": "the run goes on; its console output is dropped from here on, and this "
                                             "file keeps every event"})

    def record(self) -> None:
        problem = self.session.record(self.state)
        if problem:
            self.inbox.put(SaveFolderLost(problem, time.monotonic()))

    def internal_error(self, exc: Exception) -> int:
        trace = exc.trace if isinstance(exc, InternalError) else traceback.format_exc()
        error = str(exc) if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
        self.state = replace(self.state, phase=machine.Phase.DONE, exit_code=exitcodes.INTERNAL_ERROR,
                             reason=f"internal error: {error}")
        try:
            self.log.error(log_events.INTERNAL_ERROR, error=error, exit_code=exitcodes.INTERNAL_ERROR,
                           hint="a bug in pai-launch: every process of the run is stopped; please report it with this "
                           "log",
                           exception=trace)
            self.log.error(log_events.RUN_FINISHED, exit_code=exitcodes.INTERNAL_ERROR, reason=self.state.reason,
                           generations=self.state.generation)
            self.session.record(self.state)
        except Exception:  # noqa: BLE001 - the exit code says it even where nothing can be written
            pass
        return exitcodes.INTERNAL_ERROR

    # --- what happened ----------------------------------------------------------------------------------
    def next_event(self) -> machine.Event:
        while True:
            # A Tick every TICK seconds even while observations keep coming (a worker writing to the save folder
            # non-stop): deadlines (grace, stall, backoff) and housekeeping (reaping) must not starve.
            now = time.monotonic()
            if now >= self.next_tick:
                self.next_tick = now + TICK
                return self.tick()
            try:
                raw = self.inbox.get(timeout=self.next_tick - now)
            except queue.Empty:
                continue
            if not self.table.learn(raw):  # of an agent the run no longer runs: nothing to decide
                continue
            event = self.translator.event_for(raw, self.state)
            if event is not None:
                return event

    def tick(self) -> Tick | Resumed:
        """The loop's turn: housekeeping, then a Tick, or Resumed where the loop had not run for PAUSED_AFTER s. The
        time is read after the housekeeping, so a pause that fell within it (a scan of the process tree) counts."""
        self.housekeeping()
        now = time.monotonic()
        paused = now - self.last_tick if self.last_tick is not None else 0.0
        self.last_tick = now
        if paused >= PAUSED_AFTER:
            return self.resumed(now, paused)
        return Tick(now)

    def resumed(self, now: float, paused: float) -> Resumed:
        """The loop did not run for `paused` s: the save folder's last write, read again, goes to the machine with it
        (writes seen by the watcher meanwhile may still be queued behind this)."""
        wall = savedir.last_write(self.session.save_dir)
        last_write = None if wall is None else now - max(0.0, time.time() - wall)
        self.log.warning(log_events.SUPERVISOR_RESUMED, paused_s=round(paused, 1), phase=self.state.phase.value,
                         last_write_s_ago=None if last_write is None else round(now - last_write, 1),
                         hint="pai-launch did not run meanwhile (stopped, or its host suspended); the save folder "
                              "was read again before judging a stall")
        return Resumed(now, paused, last_write)

    def agent_slow_start(self, now: float) -> None:
        """An agent still not ready (its `import torch` hangs, a file system is slow) is said, at each doubling."""
        waiting = self.table.agent_waiting(now)
        if waiting is None:
            return
        pid, waited = waiting
        told = self.slow_told.get(pid, 0)
        if slow_start_due(waited, told, self.slow_start_after):
            self.slow_told[pid] = told + 1
            self.log.warning(log_events.AGENT_SLOW_START, agent_pid=pid, waited_s=round(waited, 1),
                             hint="the agent imports torch and starts its forkserver before any worker can start: a "
                                  "hung or slow import (a busy network file system, a broken install) holds the run; "
                                  "py-spy dump --pid PID shows where it is")

    def housekeeping(self) -> None:
        self.notifier.watchdog(time.monotonic())
        self.views.loop_turned(time.monotonic())
        self.table.housekeeping()
        self.table.heartbeat(time.monotonic())
        self.agent_slow_start(time.monotonic())
        if self.state.phase in (machine.Phase.TRAINING, machine.Phase.BACKOFF):
            running = self.state.phase is machine.Phase.TRAINING
            problem = self.session.problem(during=f"generation {self.state.generation}" if running else None)
            if problem:
                self.inbox.put(SaveFolderLost(problem, time.monotonic()))

def seconds_from(text: str | None, default: float) -> float:
    """A positive number of seconds from `text` (a test's setting), else `default`."""
    try:
        value = float(text or "")
    except ValueError:
        return default
    return value if 0 < value < default else default
