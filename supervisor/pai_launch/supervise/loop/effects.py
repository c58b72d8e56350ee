"""What each action of the state machine does to the world: start the init run or a generation, adopt a folder,
signal, kill, schedule a retry, announce a job's stop, say the moments the machine announces (a generation's end,
training reached, the marker seen, a stall), finish. One method per action, found through EFFECTS (one typed table,
complete for the Action union: checked as this module is imported); each gets the action and the state the machine
left, and what it learns goes back to the inbox as an event, never into the loop's memory.
"""

from __future__ import annotations

import queue
import signal
import time
from collections.abc import Callable
from typing import get_args

from pai_launch.core import machine
from pai_launch.core.actions import (
    Action,
    AdoptSaveFolder,
    AnnounceStop,
    Finish,
    KillRun,
    PrepareAgent,
    RecheckProgress,
    ReplaceAgent,
    ReportAgentHung,
    ReportGenerationEnd,
    ReportInitEnd,
    ReportMarkerSeen,
    ReportRunaway,
    ReportStall,
    ReportTrainingReached,
    ScheduleRetry,
    SignalRun,
    StartGeneration,
    StartInit,
)
from pai_launch.core.events import (
    AdoptionRefused,
    GenerationRefused,
    ProgressRechecked,
    SaveFolderAdopted,
    SaveFolderLost,
)
from pai_launch.core.observations import Role
from pai_launch.core.state import Policy, State
from pai_launch.placement.spec import LaunchSpec
from pai_launch.savefmt import adoptions, savedir
from pai_launch.savefmt.record import StateError
from pai_launch.supervise.children import coordination
from pai_launch.supervise.folder import logspace
from pai_launch.supervise.folder.savefolder import INIT_RUN, SaveFolderError
from pai_launch.supervise.folder.session import SaveSession
from pai_launch.supervise.job import plan
from pai_launch.supervise.loop import requeue
from pai_launch.supervise.loop.endings import Endings
from pai_launch.supervise.loop.world import World
from pai_launch.wire import crossnode, log_events, storevalues
from pai_launch.wire.protocol import StopJob


class Effects:
    """The run's hands: its spec, save session, world, log and inbox, and the one thing it remembers between actions
    (whether the init run was the last thing started)."""

    def __init__(self, spec: LaunchSpec, session: SaveSession, world: World, inbox: queue.SimpleQueue, log, *,
                 env: dict[str, str], visible: tuple[str, ...], policy: Policy,
                 store_host: coordination.StoreHost | None, started: float, endings: Endings) -> None:
        self.spec, self.session, self.inbox, self.log, self.endings = spec, session, inbox, log, endings
        self.table, self.notifier = world.table, world.notifier
        self.env, self.visible, self.policy, self.store_host = env, visible, policy, store_host
        #: When the run began (time.monotonic()): run_finished says how long it took.
        self.started = started
        #: The init run was the last thing started: the folder it removed and wrote again is taken anew.
        self.after_init = False

    def requeue_job(self) -> None:
        """--requeue-on: every process of the run is stopped; have Slurm run the job again (it resumes from here)."""
        job = self.spec.slurm_job_id or ""
        asked = requeue.requeue(job, self.spec.slurm_restart_count)
        if asked.requeued:
            self.log.warning(log_events.JOB_REQUEUED, job_id=job, evidence=asked.evidence,
                             hint="Slurm runs the job again; it resumes from the save folder")
        else:
            self.log.error(log_events.REQUEUE_FAILED, job_id=job, error=asked.error,
                           hint="was the job submitted with --requeue? requeue it by hand: scontrol requeue JOBID")

    def start_init(self, action: StartInit, state: State) -> None:
        full = savedir.space_problem(self.session.save_dir)
        if full:  # the init run could not write its settings: say why, rather than that it failed
            self.inbox.put(GenerationRefused(full, time.monotonic()))
            return
        command = plan.init_command(self.spec, self.session.run_id, self.visible)
        self.session.init_starting()
        self.after_init = True
        pid = self.table.start_plain(Role.INIT, command)
        self.log.info(log_events.INIT_STARTED, pid=pid, command=" ".join(command.argv[1:]))

    def adopt_save_folder(self, action: AdoptSaveFolder, state: State) -> None:
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

    def start_generation(self, action: StartGeneration, state: State) -> None:
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
                self.session.set_aside(action.quarantine, f"generation {action.generation - 1} could not load it: "
                                                          f"{action.quarantine_why}", self.quarantined)
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
            self.log.warning(log_events.RESUMING_FROM_SCRATCH, reason="no valid switch_*.pt left; starting after the "
                             "init run")
        self.session.watch(self.inbox.put)  # both modes: stall detection and "reached training" rely on seeing the
        # writes
        if self.spec.data_parallel:
            pid = self.table.start_plain(Role.DATA_PARALLEL, plan.data_parallel_command(self.spec, self.session.run_id,
                                                                                       action.generation))
            self.log.info(log_events.TRAINING_STARTED, mode="data_parallel", pid=pid, generation=action.generation)
            return
        self.session.generation_starting()
        request = plan.generation_request(self.spec, self.session.run_id, action.generation, load_folder, self.env,
                                          self.table.generation_log_dir(action.generation),
                                          save_dir=self.session.save_dir,
                                          failures=state.failures, records=self.session.records)
        pid, had = self.table.start_agent(request)
        self.log.info(log_events.GENERATION_STARTED, generation=action.generation, nproc=self.spec.nproc,
                      load_folder=load_folder,
                      agent_pid=pid, agent_started_ahead=had)
        nodes = self.spec.nodes
        if nodes.multi:  # nothing else is said until every node joined, or --rdzv-timeout ends the wait
            self.log.info(log_events.RENDEZVOUS_WAITING, generation=action.generation, nodes=nodes.count,
                          waiting_for=nodes.others, timeout_s=nodes.rdzv_timeout)

    def log_disk_problem(self) -> str | None:
        return logspace.problem(self.table.log_root, given=self.spec.log_dir is not None)

    def quarantined(self, name: str, problem: str, moved) -> None:
        self.log.warning(log_events.CHECKPOINT_QUARANTINED, file=name, problem=problem, moved_to=str(moved))

    def prepare_agent(self, action: PrepareAgent, state: State) -> None:
        self.table.prepare_agent()

    def replace_agent(self, action: ReplaceAgent, state: State) -> None:
        new_pid = self.table.replace_agent(action.generation)
        if new_pid is not None:
            left = {"reason": action.reason} if action.reason else {}
            self.log.warning(log_events.AGENT_REPLACED, agent_pid=action.replaced_pid, exit=action.exit, **left,
                             new_agent_pid=new_pid)

    def signal_run(self, action: SignalRun, state: State) -> None:
        targets = self.table.signal_run(action.signum, only_new=action.only_new)
        if not action.only_new:
            self.log.info(log_events.SIGNAL_FORWARDED, signal=signal.Signals(action.signum).name, pids=targets)
        elif targets:
            self.log.info(log_events.LATE_WORKERS_SIGNALLED, signal=signal.Signals(action.signum).name, pids=targets)

    def kill_run(self, action: KillRun, state: State) -> None:
        self.log.warning(log_events.RUN_KILLED, processes=self.table.kill_all())

    def schedule_retry(self, action: ScheduleRetry, state: State) -> None:
        # The backoff counts from the failure's discovery; retry_in_s is what is left of it as this line is written.
        left = max(0.0, (state.current.retry_at or 0.0) - time.monotonic())
        self.log.warning(log_events.RETRY_SCHEDULED, delay_s=action.delay, retry_in_s=round(left, 3),
                         failures=action.failures,
                         max_failures=self.spec.max_failures, reason=action.reason)

    def announce_stop(self, action: AnnounceStop, state: State) -> None:
        nodes = self.spec.nodes
        stop = StopJob(action.signum, action.reason, nodes.host, nodes.port, nodes.secret)
        if self.store_host is not None:
            self.store_host.put(crossnode.STOP, storevalues.StopFlag(action.signum, action.reason))
            self.table.stop_job(stop)  # this node's agent, too, reports the generation as stopped, not failed
            told = True
        else:
            told = self.table.stop_job(stop)
        log = self.log.info if told else self.log.warning
        log(log_events.JOB_STOP_ANNOUNCED, reason=action.reason, told=told,
            **({} if told else {"hint": "no agent to reach node 0's store: the other nodes notice this node is gone"}))

    def recheck_progress(self, action: RecheckProgress, state: State) -> None:
        self.inbox.put(ProgressRechecked(complete=self.session.complete(), progressed=self.session.progress(),
                                         now=time.monotonic()))

    def report_agent_hung(self, action: ReportAgentHung, state: State) -> None:
        kill_in = state.current.stop.deadline - time.monotonic()
        self.log.error(log_events.AGENT_HUNG, generation=state.generation, agent_pid=self.table.agent_pid,
                       silent_s=round(action.silent, 1), reason=state.reason,
                       action=f"stopping its workers, then killing it in {kill_in:.0f} s; the generation is retried "
                              "with a new agent")

    def report_runaway(self, action: ReportRunaway, state: State) -> None:
        self.log.warning(log_events.DENDRITES_PAST_MAXIMUM, generation=state.generation, dendrites=action.dendrites,
                         max_dendrites=action.most, limit_from=action.source,
                         hint="PerforatedAI keeps adding dendrites past the maximum its settings allow (a dendrite "
                              "capacity test left on, or a setting changed after perforate_model): check the script's "
                              "GPA.pc settings (pai-launch doctor SCRIPT names one changed too late), or stop the "
                              "run at a count with --max-dendrites N")
        self.notifier.status(f"generation {state.generation}: {action.dendrites} dendrites, past the maximum of "
                             f"{action.most} the script's settings allow")

    def report_stall(self, action: ReportStall, state: State) -> None:
        self.log.error(log_events.STALL_DETECTED, generation=state.generation, idle_s=round(action.idle, 1),
                       action=f"sending SIGUSR1, then stopping the workers in {self.policy.stall_dump_wait:.0f} s")

    def report_init_end(self, action: ReportInitEnd, state: State) -> None:
        self.endings.say_init(action)

    def report_generation_end(self, action: ReportGenerationEnd, state: State) -> None:
        self.endings.say(action)

    def report_training_reached(self, action: ReportTrainingReached, state: State) -> None:
        self.log.info(log_events.TRAINING_REACHED, generation=state.generation, after_s=action.after)

    def report_marker_seen(self, action: ReportMarkerSeen, state: State) -> None:
        self.log.info(log_events.COMPLETION_MARKER_SEEN, generation=state.generation, grace_s=self.spec.grace)

    def finish(self, action: Finish, state: State) -> int:
        """The run's end: Slurm asked to run the job again where the stop was --requeue-on's; its last line."""
        if state.requeue and self.spec.nodes.coordinator:
            self.requeue_job()
        asked = state.stopped_by is not None and action.exit_code >= 128  # not a fault found meanwhile
        stopped = {"stopped_by": state.stopped_by} if asked else {}
        log = self.log.info if action.exit_code == 0 or stopped else self.log.error
        log(log_events.RUN_FINISHED, exit_code=action.exit_code, reason=action.reason, generations=state.generation,
            duration_s=round(time.monotonic() - self.started, 2), **stopped)
        return action.exit_code


#: Each action the machine can ask for and what carries it out; only Finish returns (the run's exit code).
EFFECTS: dict[type, Callable[[Effects, Action, machine.State], int | None]] = {
    StartInit: Effects.start_init,
    AdoptSaveFolder: Effects.adopt_save_folder,
    StartGeneration: Effects.start_generation,
    PrepareAgent: Effects.prepare_agent,
    ReplaceAgent: Effects.replace_agent,
    SignalRun: Effects.signal_run,
    KillRun: Effects.kill_run,
    ScheduleRetry: Effects.schedule_retry,
    AnnounceStop: Effects.announce_stop,
    RecheckProgress: Effects.recheck_progress,
    ReportAgentHung: Effects.report_agent_hung,
    ReportRunaway: Effects.report_runaway,
    ReportStall: Effects.report_stall,
    ReportInitEnd: Effects.report_init_end,
    ReportGenerationEnd: Effects.report_generation_end,
    ReportTrainingReached: Effects.report_training_reached,
    ReportMarkerSeen: Effects.report_marker_seen,
    Finish: Effects.finish,
}


def missing_effects(table: dict[type, Callable] = EFFECTS) -> list[str]:
    """Actions nothing carries out: checked as this module is imported, so a new action without its effect fails
    every test that imports the loop rather than a run that reaches it."""
    return sorted(kind.__name__ for kind in get_args(Action) if kind not in table)


if missing_effects():
    raise ImportError(f"supervise.loop.effects: nothing carries out {', '.join(missing_effects())}: add it to EFFECTS")
