"""The one impure loop: turn what happens into events, feed them to the state machine, carry out its actions.

Decisions are machine.py's; the save folder is session.py's; processes are proctable.py's. This is
also the exit-code boundary of a run: whatever goes wrong in here, run() returns a documented exit
code and leaves no process of ours behind.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import time
import traceback
from dataclasses import replace
from typing import get_args

from pai_launch.wire import log_events
from pai_launch.savefmt import adoptions
from pai_launch.supervise import console
from pai_launch.supervise import coordination
from pai_launch.wire import crossnode
from pai_launch.core import exitcodes
from pai_launch.wire import jobsecret
from pai_launch.supervise import logs
from pai_launch.supervise import logspace
from pai_launch.core import machine
from pai_launch.supervise import plan
from pai_launch.savefmt import savedir
from pai_launch.core.actions import Action, Finish
from pai_launch.core.spec import LaunchSpec, policy_for
from pai_launch.core.events import (
    AdoptionRefused, Began, GenerationEnded, GenerationRefused, Resumed, Role, SaveFolderAdopted, SaveFolderLost, Tick,
)
from pai_launch.supervise.notify import Notifier, child_env
from pai_launch.supervise.observer import InternalError, Observer
from pai_launch.supervise.proctable import ProcessTable
from pai_launch.wire.protocol import StopJob
from pai_launch.core.reports import phase_status
from pai_launch.savefmt.record import StateError
from pai_launch.supervise.runviews import RunViews
from pai_launch.supervise.session import INIT_RUN, SaveFolderError, SaveSession

TICK = 0.2
#: A loop that ticked this much later than TICK was not running (pai-launch was paused): Resumed, not Tick.
PAUSED_AFTER = 5.0


class Runner:
    def __init__(self, spec: LaunchSpec, session: SaveSession, inbox: queue.SimpleQueue, env: dict[str, str],
                 visible: tuple[str, ...], job: coordination.Job | None = None,
                 notes: list[tuple[str, dict]] = ()) -> None:
        """`job`: a multi-node job's store (node 0 serves it, the others watch it; closed when the run ends); `notes`:
        warnings for the log (doctor's findings), as (event, fields)."""
        self.notes = list(notes)
        self.spec, self.session, self.inbox, self.env, self.visible = spec, session, inbox, env, visible
        self.policy = policy_for(spec, os.environ)
        self.notifier = Notifier(env, os.getpid())
        self.table = ProcessTable(python=spec.python, workdir=spec.workdir, env=child_env(env), report=inbox.put,
                                  log_dir=spec.log_dir, agent_args=spec.agent_args)
        self.state = machine.start(**session.carried_over())
        self.next_tick = 0.0
        #: When the last Tick (or Resumed) was made: a much later one means the loop did not run meanwhile.
        self.last_tick: float | None = None
        self.job = job
        self.store_host = job.host if job is not None else None
        #: The init run was the last thing started: the folder it removed and wrote again is taken anew.
        self.after_init = False

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
            self.log.warning(log_events.SAVE_LOCK_SQUATTED, **squatted, hint="another user's socket holds the name of the save "
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
            self.observer = Observer(self.session, self.table, self.log, self.notifier)
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
        started = time.monotonic()
        self.inbox.put(Began(self.session.needs_init(), started))  # behind any signal already queued
        if self.spec.slurm_job_id is not None:
            self.log.info(log_events.SLURM_JOB, job_id=self.spec.slurm_job_id, restart_count=self.spec.slurm_restart_count,
                          requeue_on=signal.Signals(self.spec.requeue_on).name if self.spec.requeue_on else None)
        if self.spec.nodes.multi:
            self.log.info(log_events.JOB_NODES, nodes=self.spec.nodes.describe(), job_id=plan.job_id(self.spec, self.session.run_id),
                          serving_store=self.store_host is not None)
        self.log.info(log_events.RUN_STARTED, script=str(self.spec.script), nproc=self.spec.nproc, save_folder=str(self.session.save_dir),
                      mode="data_parallel" if self.spec.data_parallel else "ddp", pid=os.getpid(),
                      resumed=self.session.previous is not None, generation=self.state.generation, failures=self.state.failures)
        self.views.start(self.log)
        for event, fields in self.notes:
            self.log.warning(event, **fields)
        self.record()
        while True:
            before = self.state
            self.state, actions = machine.step(self.policy, before, self.next_event())
            reached = self.state.current.reached_training and not before.current.reached_training
            if reached and self.state.phase is machine.Phase.TRAINING:
                # The workers' first write beyond start-up files: what a restart costs ends here.
                self.log.info(log_events.TRAINING_REACHED, generation=self.state.generation,
                              after_s=round(time.monotonic() - self.state.current.started_at, 2))
            if self.state.marker_seen and not before.marker_seen:
                self.log.info(log_events.COMPLETION_MARKER_SEEN, generation=self.state.generation, grace_s=self.spec.grace)
            self.record()
            self.notifier.report(phase_status(self.state, self.policy, self.observer.dendrites),
                                 stopping=self.state.phase in (machine.Phase.STOPPING, machine.Phase.DONE))
            for action in actions:
                if isinstance(action, Finish) and self.state.requeue and self.spec.nodes.coordinator:
                    self.requeue_job()
                if isinstance(action, Finish):
                    asked = self.state.stopped_by is not None and action.exit_code >= 128  # not a fault found meanwhile
                    stopped = {"stopped_by": self.state.stopped_by} if asked else {}
                    log = self.log.info if action.exit_code == 0 or stopped else self.log.error
                    log(log_events.RUN_FINISHED, exit_code=action.exit_code, reason=action.reason, generations=self.state.generation,
                        duration_s=round(time.monotonic() - started, 2), **stopped)
                    return action.exit_code
                getattr(self, EXECUTORS[type(action)])(action)
            if self.table.run_started():
                self.notifier.ready()  # once: the first process of the run is running

    def requeue_job(self) -> None:
        """--requeue-on: every process of the run is stopped; have Slurm run the job again (it resumes from here)."""
        job = self.spec.slurm_job_id or ""
        try:
            done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.log.error(log_events.REQUEUE_FAILED, job_id=job, error=str(exc), hint="requeue the job by hand: scontrol requeue JOBID")
            return
        if done.returncode == 0:
            self.log.warning(log_events.JOB_REQUEUED, job_id=job, hint="Slurm runs the job again; it resumes from the save folder")
        else:
            self.log.error(log_events.REQUEUE_FAILED, job_id=job, error=(done.stderr or done.stdout).strip(),
                           hint="was the job submitted with --requeue? requeue it by hand: scontrol requeue JOBID")

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
                           hint="a bug in pai-launch: every process of the run is stopped; please report it with this log",
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
                self.housekeeping()
                paused = now - self.last_tick if self.last_tick is not None else 0.0
                self.last_tick = now = time.monotonic()
                if paused >= PAUSED_AFTER:
                    return self.resumed(now, paused)
                return Tick(now)
            try:
                raw = self.inbox.get(timeout=self.next_tick - now)
            except queue.Empty:
                continue
            event = self.observer.event_for(raw, self.state)
            if event is not None:
                return event

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

    def housekeeping(self) -> None:
        self.notifier.watchdog(time.monotonic())
        self.table.housekeeping()
        self.table.heartbeat(time.monotonic())
        if self.state.phase in (machine.Phase.TRAINING, machine.Phase.BACKOFF):
            running = self.state.phase is machine.Phase.TRAINING
            problem = self.session.problem(during=f"generation {self.state.generation}" if running else None)
            if problem:
                self.inbox.put(SaveFolderLost(problem, time.monotonic()))

    # --- actions --------------------------------------------------------------------------------------
    def execute_StartInit(self, action) -> None:
        command = plan.init_command(self.spec, self.session.run_id, self.visible)
        self.session.init_starting()
        self.after_init = True
        pid = self.table.start_plain(Role.INIT, command)
        self.log.info(log_events.INIT_STARTED, pid=pid, command=" ".join(command.argv[1:]))

    def execute_AdoptSaveFolder(self, action) -> None:
        now = time.monotonic()
        try:
            self.session.adopt(action.name)
        except StateError as exc:
            self.inbox.put(AdoptionRefused(f"the script saves to {action.name}, but {exc}", now))
        except SaveFolderError as exc:
            self.inbox.put(SaveFolderLost(str(exc), now))
        else:
            self.log.warning(log_events.SAVE_FOLDER_ADOPTED, save_folder=action.name, instead_of=self.spec.save_name,
                             recorded_in=str(adoptions.record_path(self.spec.workdir)),
                             hint=f"the script saves to {action.name}; the same command resumes there (or pass "
                                  f"--save-name {action.name} to say so)")
            problem = self.session.remember_adoption()
            if problem:
                self.log.warning(log_events.ADOPTION_NOT_RECORDED, error=problem,
                                 hint=f"start this run again with --save-name {action.name} to resume it")
            self.inbox.put(SaveFolderAdopted(action.name, now))

    def execute_StartGeneration(self, action) -> None:
        during, self.after_init = (INIT_RUN if self.after_init else None), False
        # One node's files can be made again in a folder its init run removed and wrote; a job's other nodes had theirs
        # in the removed one too, so a job stops and says why.
        again = during is not None and not self.spec.nodes.multi
        remade = again and self.session.replaced()
        problem = self.session.take(again=again, during=during) or self.session.problem(during)
        if remade and not problem:
            self.log.warning(log_events.SAVE_FOLDER_REMADE, save_folder=str(self.session.save_dir),
                             reason="the init run removed the save folder and wrote it again",
                             hint="pai-launch's own files are made again in the new folder")
        had_switches = savedir.has_switches(self.session.save_dir)
        try:
            if action.quarantine is not None and not problem:
                self.session.set_aside(action.quarantine, f"every rank failed to load it in generation "
                                                          f"{action.generation - 1}", self.quarantined)
            load_folder = None if problem else self.session.resume_folder(self.quarantined)
        except SaveFolderError as exc:
            problem = str(exc)
        if problem:  # nothing is started: the machine hears why
            self.inbox.put(GenerationRefused(problem, time.monotonic()))
            return
        output_problem = None if self.spec.data_parallel else self.log_disk_problem()
        if output_problem:  # the workers' output would be lost, and with it any failure's log tail
            self.inbox.put(GenerationRefused(output_problem, time.monotonic(), log_dir=True))
            return
        if load_folder is None and had_switches:
            self.log.warning(log_events.RESUMING_FROM_SCRATCH, reason="no valid switch_*.pt left; starting after the init run")
        self.session.watch(self.inbox.put)  # both modes: stall detection and "reached training" rely on seeing the writes
        if self.spec.data_parallel:
            pid = self.table.start_plain(Role.DATA_PARALLEL, plan.data_parallel_command(self.spec, self.session.run_id,
                                                                                       action.generation))
            self.log.info(log_events.TRAINING_STARTED, mode="data_parallel", pid=pid, generation=action.generation)
            return
        self.session.generation_starting()
        request = plan.generation_request(self.spec, self.session.run_id, action.generation, load_folder, self.env,
                                          self.table.generation_log_dir(action.generation), save_dir=self.session.save_dir,
                                          failures=self.state.failures)
        pid, had = self.table.start_agent(request)
        self.log.info(log_events.GENERATION_STARTED, generation=action.generation, nproc=self.spec.nproc, load_folder=load_folder,
                      agent_pid=pid, agent_started_ahead=had)

    def log_disk_problem(self) -> str | None:
        return logspace.problem(self.table.log_root, given=self.spec.log_dir is not None)

    def quarantined(self, name: str, problem: str, moved) -> None:
        self.log.warning(log_events.CHECKPOINT_QUARANTINED, file=name, problem=problem, moved_to=str(moved))

    def execute_PrepareAgent(self, action) -> None:
        self.table.prepare_agent()

    def execute_ReplaceAgent(self, action) -> None:
        new_pid = self.table.replace_agent(action.generation)
        if new_pid is not None:
            self.log.warning(log_events.AGENT_REPLACED, **self.observer.last_agent_exit, new_agent_pid=new_pid)

    def execute_SignalRun(self, action) -> None:
        targets = self.table.signal_run(action.signum, only_new=action.only_new)
        if not action.only_new:
            self.log.info(log_events.SIGNAL_FORWARDED, signal=signal.Signals(action.signum).name, pids=targets)
        elif targets:
            self.log.info(log_events.LATE_WORKERS_SIGNALLED, signal=signal.Signals(action.signum).name, pids=targets)

    def execute_KillRun(self, action) -> None:
        self.log.warning(log_events.RUN_KILLED, processes=self.table.kill_all())

    def execute_ScheduleRetry(self, action) -> None:
        # The backoff counts from the failure's discovery; retry_in_s is what is left of it as this line is written.
        left = max(0.0, (self.state.current.retry_at or 0.0) - time.monotonic())
        self.log.warning(log_events.RETRY_SCHEDULED, delay_s=action.delay, retry_in_s=round(left, 3), failures=action.failures,
                         max_failures=self.spec.max_failures, reason=action.reason)

    def execute_AnnounceStop(self, action) -> None:
        nodes = self.spec.nodes
        stop = StopJob(action.signum, action.reason, nodes.host, nodes.port, nodes.secret)
        if self.store_host is not None:
            self.store_host.put(crossnode.STOP, crossnode.StopFlag(action.signum, action.reason))
            self.table.stop_job(stop)  # this node's agent, too, reports the generation as stopped, not failed
            told = True
        else:
            told = self.table.stop_job(stop)
        log = self.log.info if told else self.log.warning
        log(log_events.JOB_STOP_ANNOUNCED, reason=action.reason, told=told,
            **({} if told else {"hint": "no agent to reach node 0's store: the other nodes notice this node is gone"}))

    def execute_RecheckProgress(self, action) -> None:
        self.inbox.put(GenerationEnded(complete=self.session.complete(), progressed=self.session.progress(),
                                       now=time.monotonic(), recheck=True))

    def execute_ReportAgentHung(self, action) -> None:
        kill_in = self.state.current.stop.deadline - time.monotonic()
        self.log.error(log_events.AGENT_HUNG, generation=self.state.generation, agent_pid=self.table.agent_pid,
                       silent_s=round(action.silent, 1), reason=self.state.reason,
                       action=f"stopping its workers, then killing it in {kill_in:.0f} s; the generation is retried "
                              "with a new agent")

    def execute_ReportStall(self, action) -> None:
        self.log.error(log_events.STALL_DETECTED, generation=self.state.generation, idle_s=round(action.idle, 1),
                       action=f"sending SIGUSR1, then stopping the workers in {self.policy.stall_dump_wait:.0f} s")


#: Each action the machine can ask for and the Runner method that carries it out (Finish ends the loop itself).
EXECUTORS: dict[type, str] = {kind: f"execute_{kind.__name__}" for kind in get_args(Action) if kind is not Finish}


def missing_executors(runner: type = Runner) -> list[str]:
    """Actions the runner cannot carry out: checked as this module is imported, so a new action without its executor
    fails every test that imports the runner rather than a run that reaches it."""
    return sorted(kind.__name__ for kind, name in EXECUTORS.items() if not callable(getattr(runner, name, None)))


if missing_executors():
    raise ImportError(f"supervise.runner: no executor for {', '.join(missing_executors())}: add Runner.execute_<Action>")
