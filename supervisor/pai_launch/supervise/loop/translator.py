"""What the supervisor's threads report, turned into the state machine's events.

An exit becomes InitExited or GenerationEnded with what the save folder says (where the init run wrote, which switch
files changed, is the marker there); a save-folder write becomes SaveActivity; a thread's crash, InternalError. What a
report tells is said here, once (a signal, a switch file written, an agent's account of itself); what the machine
announces (a generation's end and its verdict among them) is said by the effects. The process table learned of its
children's ends first (ProcessTable.learn): the translator never changes it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from pai_launch.core import exitcodes, machine
from pai_launch.core.events import (
    AgentLeft,
    GenerationEnded,
    GenerationJoined,
    GenerationRefused,
    InitExited,
    JobStopped,
    JobStopSeen,
    JobStoreLost,
    ProgressRechecked,
    SaveActivity,
    SaveFolderLost,
    WorkersLaunched,
    WorkersWaiting,
)
from pai_launch.core.failure import Failure
from pai_launch.core.observations import (
    AgentGone,
    AgentJoined,
    AgentReported,
    AgentStarted,
    AgentTookRequest,
    Observation,
    ProcessExited,
    RestructureRecorded,
    Role,
    SaveWritten,
    SignalReceived,
    ThreadFailed,
)
from pai_launch.core.reports import agent_exit_fields, agent_started_line
from pai_launch.savefmt import restructure_record, savedir
from pai_launch.savefmt.pai_files import folder_facts
from pai_launch.supervise.children import signals
from pai_launch.supervise.folder import logspace
from pai_launch.supervise.folder.session import SaveSession
from pai_launch.supervise.loop.endings import Endings
from pai_launch.supervise.outputs.notify import Notifier
from pai_launch.wire import log_events
from pai_launch.wire.errors import LaunchError


class InternalError(LaunchError):
    """A bug in pai-launch (for example in one of its threads); carries the traceback to log."""

    exit_code = exitcodes.INTERNAL_ERROR

    def __init__(self, message: str, trace: str) -> None:
        super().__init__(message)
        self.trace = trace


class Translator:
    def __init__(self, session: SaveSession, log_root: Path | None, log, notifier: Notifier,
                 endings: Endings) -> None:
        """`log_root`: where the workers' output goes (the process table's), to tell a full disk as the cause."""
        self.session, self.log_root, self.log, self.notifier = session, log_root, log, notifier
        self.endings = endings
        #: (generation, switch file) already logged as switch_written (a file is written in several events).
        self.announced: set[tuple[int, str]] = set()
        #: In-process restructures already logged, by (record file, its time): a file is written in several events.
        self.recorded: set[tuple[str, object]] = set()

    def event_for(self, raw: Observation | machine.Event, state: machine.State) -> machine.Event | None:
        """An observation as the machine's event, with what the save folder says; None: nothing to decide. What the
        threads report goes through TRANSLATIONS; the events the loop queued itself pass through as they are."""
        translate = TRANSLATIONS.get(type(raw))
        return raw if translate is None else translate(self, raw, state)  # type: ignore[return-value]

    def on_thread_failed(self, raw: ThreadFailed, state: machine.State) -> None:
        raise InternalError(f"thread {raw.thread} failed: {raw.error}", raw.traceback)

    def on_signal(self, raw: SignalReceived, state: machine.State) -> SignalReceived:
        self.log.warning(log_events.SIGNAL_RECEIVED, signal=signal.Signals(raw.signum).name, phase=state.phase.value)
        if raw.signum == signal.SIGQUIT:  # asked for a dump: where each of pai-launch's threads is, then the stop
            self.log.warning(log_events.STACK_DUMP, pid=os.getpid(), stacks=signals.thread_stacks())
        return raw

    def on_save_written(self, raw: SaveWritten, state: machine.State) -> SaveActivity | None:
        if raw.now < state.current.started_at:  # seen before this generation (or init run) began: an earlier one's
            return None                         # write, reported late; not this one's progress nor its activity
        number = savedir.switch_number(raw.name)
        if number is not None and (state.generation, raw.name) not in self.announced:
            # Whether it holds new dendrites is known once the generation ends (PerforatedAI writes its
            # param_counts.csv after the switch file): dendrites_added or dendrites_rejected then.
            self.announced.add((state.generation, raw.name))
            self.log.info(log_events.SWITCH_WRITTEN, switch=number, file=raw.name, generation=state.generation)
            self.notifier.status(f"generation {state.generation} running; {raw.name} written")
        return SaveActivity(raw.now, training=not savedir.is_startup_file(raw.name))

    def on_progress_rechecked(self, raw: ProgressRechecked, state: machine.State) -> ProgressRechecked:
        if raw.progressed and state.phase is machine.Phase.SETTLING:
            self.endings.judge(state.generation, None, raw.progressed)  # another node's switch file showed up late
        return raw

    def on_agent_reported(self, raw: AgentReported, state: machine.State) -> machine.Event:
        return self.agent_reported(raw, state)

    def on_agent_started(self, raw: AgentStarted, state: machine.State) -> None:
        self.agent_started(raw)

    def on_agent_took_request(self, raw: AgentTookRequest, state: machine.State) -> machine.Event:
        return WorkersLaunched(raw.now) if raw.taken else WorkersWaiting(raw.now)

    def on_agent_gone(self, raw: AgentGone, state: machine.State) -> AgentLeft:
        return self.agent_gone(raw)

    def on_agent_joined(self, raw: AgentJoined, state: machine.State) -> GenerationJoined:
        if (raw.generation, raw.failures) != (state.generation, state.failures):
            self.log.warning(log_events.GENERATION_JOINED, generation=raw.generation, instead_of=state.generation,
                             failures=raw.failures, hint="node 0 numbers the job's generations and counts its "
                             "failures; this node follows")
        return GenerationJoined(raw.generation, raw.now, raw.failures)

    def on_refused(self, raw: GenerationRefused, state: machine.State) -> GenerationRefused:
        if state.phase is not machine.Phase.STOPPING:
            self.log.error(log_events.LOG_DIR_FULL if raw.log_dir else log_events.SAVE_FOLDER_FAILED, reason=raw.reason)
        return raw

    def on_folder_lost(self, raw: SaveFolderLost, state: machine.State) -> SaveFolderLost:
        if state.phase is not machine.Phase.STOPPING:
            self.log.error(log_events.SAVE_FOLDER_FAILED, reason=raw.reason)
        return raw

    def on_store_lost(self, raw: JobStoreLost, state: machine.State) -> JobStoreLost:
        self.log.error(log_events.JOB_STORE_LOST, reason=raw.reason)
        return raw

    def on_stop_seen(self, raw: JobStopSeen, state: machine.State) -> JobStopSeen:
        self.log.info(log_events.JOB_STOP_SEEN, reason=raw.reason, hint="node 0's store closed with the job stopped")
        return raw

    def plain_exited(self, raw: ProcessExited, state: machine.State) -> machine.Event:
        if raw.role is Role.INIT:
            wrote_to = self.session.init_wrote_to() if raw.returncode == 0 else None
            return InitExited(raw.returncode, raw.log_tail, wrote_to=wrote_to, now=raw.now)
        failures = () if raw.returncode == 0 else (Failure.worker(0, raw.returncode, raw.log_tail),)
        folder = self.session.at_generation_end()
        return GenerationEnded(failures, complete=folder.complete, now=raw.now, **folder.dendrite_facts())

    def agent_started(self, raw: AgentStarted) -> None:
        warning, name, fields = agent_started_line(raw)
        (self.log.warning if warning else self.log.info)(name, **fields)

    def agent_gone(self, raw: AgentGone) -> AgentLeft:
        """An agent that exited between generations: logged when it held no request (one that held one is logged
        as replaced, or not, once the machine has decided)."""
        fields = agent_exit_fields(raw)
        if raw.pending is None and (raw.why or raw.returncode != 0):
            self.log.warning(log_events.AGENT_EXITED, **fields)
        return AgentLeft(None if raw.pending is None else raw.pending.generation, raw.now, agent_pid=raw.agent_pid,
                         exit=fields["exit"], reason=raw.why)

    def agent_reported(self, raw: AgentReported, state: machine.State) -> machine.Event:
        result = raw.result
        hung = state.phase is machine.Phase.STOPPING and state.current.stop.cause is machine.StopCause.AGENT_HUNG
        if result is None and hung:  # killed for not answering: that is the cause, not the kill
            failures = (Failure.agent(f"{state.reason}; it was killed"),)
        elif result is None:
            failures = (Failure.launcher(f"agent process ended with {exitcodes.describe_returncode(raw.returncode)} "
                                         "before reporting a result"),)
        elif result.cancelled:
            self.log.info(log_events.WORKERS_NOT_STARTED, generation=state.generation, agent_pid=raw.agent_pid,
                          reason="the run was stopped before the agent started them")
            failures = ()
        elif result.fault:
            failures = (Failure.agent(result.fault),)
        elif result.error:
            failures = (Failure.launcher(result.error),)
        else:
            multi = self.session.spec.nodes.multi
            failures = tuple(Failure.worker(f.rank, f.returncode, f.log_tail, node=f.node if multi else None,
                                            host=f.host)
                             for f in result.failures)
        stopped = JobStopped(result.stopped_signal, result.stopped_reason) if result and result.stopped_signal else None
        folder = self.session.at_generation_end()
        progressed, failures = folder.checked_progress(failures, state.generation)
        fatal = result.fatal if result else None
        if fatal is None and result is not None and not result.error and failures:
            fatal = self.output_lost()
        event = GenerationEnded(failures, complete=folder.complete, progressed=progressed, now=raw.now, stopped=stopped,
                                fatal=fatal, loaded_from=folder.loaded_switch,
                                **(folder.dendrite_facts() if progressed else {}))
        return event

    def output_lost(self) -> str | None:
        """A failed generation whose output went to a full disk: that is the failure to report (its log tails are
        empty or cut short, and a retry into a full disk cannot help)."""
        problem = logspace.problem(self.log_root, given=self.session.spec.log_dir is not None)
        if problem:
            self.log.error(log_events.LOG_DIR_FULL, reason=problem)
        return problem

    def restructured_in_process(self, raw: RestructureRecorded, state: machine.State) -> SaveActivity | None:
        """restructured_in_process, once per record, with the dendrites now in the model: training went on."""
        record = restructure_record.read(Path(raw.path))
        if record is None or (raw.path, record.get("at")) in self.recorded:
            return None
        self.recorded.add((raw.path, record.get("at")))
        now_in_model = folder_facts(self.session.save_dir)[0]  # the endings' count stays the start, for the end
        fields = {key: value for key, value in record.items() if key not in ("at", "switch")}
        name = record.get("switch")
        self.log.info(log_events.RESTRUCTURED_IN_PROCESS, generation=state.generation, file=name,
                      switch=savedir.switch_number(name) if name else None, dendrites=now_in_model, **fields)
        self.notifier.status(f"generation {state.generation}: restructured in process, {now_in_model} dendrites in all")
        return SaveActivity(raw.now, training=True)


#: What each kind of report from the threads becomes (one method each); anything else is already an event.
TRANSLATIONS: dict[type, Callable[[Translator, object, machine.State], machine.Event | None]] = {
    ThreadFailed: Translator.on_thread_failed,
    SignalReceived: Translator.on_signal,
    SaveWritten: Translator.on_save_written,
    RestructureRecorded: Translator.restructured_in_process,
    ProgressRechecked: Translator.on_progress_rechecked,
    ProcessExited: Translator.plain_exited,
    AgentReported: Translator.on_agent_reported,
    AgentStarted: Translator.on_agent_started,
    AgentTookRequest: Translator.on_agent_took_request,
    AgentGone: Translator.on_agent_gone,
    AgentJoined: Translator.on_agent_joined,
    GenerationRefused: Translator.on_refused,
    SaveFolderLost: Translator.on_folder_lost,
    JobStoreLost: Translator.on_store_lost,
    JobStopSeen: Translator.on_stop_seen,
}
