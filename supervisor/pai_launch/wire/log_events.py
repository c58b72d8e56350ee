"""The events pai-launch logs (its JSON lines, `SAVE/.pai-launch/events.jsonl`): a protocol between the supervisor
that writes them and every reader (`pai-launch status`, the metrics, the live status line, the tests, and users' own
alerting). Each event is declared once here with the fields it may carry; writers and readers name events through
these constants. tests/unit/test_log_events.py fails on a name written or read anywhere that is not declared here,
and on a field a reader reads that its event does not declare; the process tiers' one events reader fails on a
field written that its event does not declare.
"""

from __future__ import annotations

from collections.abc import Mapping


class LogEvent(str):
    """An event's name (a str: what the log writes as "event") and the fields it may carry besides COMMON."""

    fields: frozenset[str]

    def __new__(cls, name: str, *fields: str | tuple[str, ...]) -> "LogEvent":
        """`fields`: space-separated names, or a group of them shared by several events (CAUSE, ENDED, ...)."""
        event = super().__new__(cls, name)
        event.fields = frozenset(key for part in fields for key in (part.split() if isinstance(part, str) else part))
        return event


#: Fields any event may carry: what the logger adds (the time, the level, the run's id, a job's node) and a hint.
COMMON = frozenset({"event", "time", "timestamp", "level", "run_id", "node", "hint"})
#: What explains a failure's log tail (wire.failure_causes.fields): the line, and a known cause's name, fix and check.
CAUSE = ("log_line", "cause", "fix", "doctor_id")
#: Every generation's end says these (core.reports.generation_end).
ENDED = ("generation", "duration_s", "complete", "switch_files")
#: The worker that failed, and where (a job's node and host).
WORKER = ("rank", "node", "host", "exit")
#: An agent that left (supervise.loop.translator.agent_exit_fields).
AGENT_EXIT = ("agent_pid", "exit", "reason")

# --- the run -------------------------------------------------------------------------------------
RUN_STARTED = LogEvent("run_started", "script nproc save_folder mode pid resumed generation failures")
RUN_FINISHED = LogEvent("run_finished", "exit_code reason generations duration_s stopped_by")
RUN_KILLED = LogEvent("run_killed", "processes")  # processes still there after the grace: SIGKILLed
ALREADY_COMPLETE = LogEvent("already_complete", "save_folder marker_written")
INTERNAL_ERROR = LogEvent("internal_error", "error exit_code exception")
LEFTOVERS_KILLED = LogEvent("leftovers_killed", "processes survivors")
# pai-launch itself was paused (SIGSTOP, a frozen VM) and goes on:
SUPERVISOR_RESUMED = LogEvent("supervisor_resumed", "paused_s phase last_write_s_ago")
CONSOLE_LOST = LogEvent("console_lost", "stream error")
STACK_DUMP = LogEvent("stack_dump", "pid stacks")
METRICS_SERVING = LogEvent("metrics_serving", "url health")
METRICS_UNAVAILABLE = LogEvent("metrics_unavailable", "error")
METRICS_EXPOSED = LogEvent("metrics_exposed", "host hint")
AGENT_SLOW_START = LogEvent("agent_slow_start", "agent_pid waited_s hint")

# --- before the run: the script and the machine, as warnings ------------------------------------------
SCRIPT_PROBLEM = LogEvent("script_problem", "id path line problem fix")  # one of doctor's errors
SCRIPT_CHECK = LogEvent("script_check", "script errors warnings")
SCRIPT_CHECK_FAILED = LogEvent("script_check_failed", "error")
SCRIPT_CHECK_GAVE_UP = LogEvent("script_check_gave_up", "script budget_s")  # doctor out of time; the run starts
NPROC_ABOVE_CORES = LogEvent("nproc_above_cores", "nproc cores")
# A torchrun option (on the command line or as PET_*) read with another meaning, or one that does not apply here:
TORCHRUN_FLAG_MAPPED = LogEvent("torchrun_flag_mapped", "flag value as_option why")
TORCHRUN_FLAG_IGNORED = LogEvent("torchrun_flag_ignored", "flag value why")

# --- signals ---------------------------------------------------------------------------------------
SIGNAL_RECEIVED = LogEvent("signal_received", "signal phase")
SIGNAL_FORWARDED = LogEvent("signal_forwarded", "signal pids")
LATE_WORKERS_SIGNALLED = LogEvent("late_workers_signalled", "signal pids")

# --- the init run ----------------------------------------------------------------------------------
INIT_STARTED = LogEvent("init_started", "pid command")
INIT_EXITED = LogEvent("init_exited", "exit duration_s stopped_by")
INIT_OUTPUT_TAIL = LogEvent("init_output_tail", "tail", CAUSE)

# --- the save folder -------------------------------------------------------------------------------
SAVE_FOLDER_ADOPTED = LogEvent("save_folder_adopted", "save_folder instead_of recorded_in")
ADOPTED_FOLDER_USED = LogEvent("adopted_folder_used", "save_folder instead_of recorded_in")
ADOPTION_NOT_RECORDED = LogEvent("adoption_not_recorded", "error")
SAVE_FOLDER_MOVED_ASIDE = LogEvent("save_folder_moved_aside", "save_folder moved_to")
SAVE_FOLDER_REMADE = LogEvent("save_folder_remade", "save_folder reason")
SAVE_FOLDER_FAILED = LogEvent("save_folder_failed", "reason")
SAVE_LOCK_SQUATTED = LogEvent("save_lock_squatted", "socket holder holder_pid holder_uid holder_user")
CHECKPOINT_QUARANTINED = LogEvent("checkpoint_quarantined", "file problem moved_to")
RESUMING_FROM_SCRATCH = LogEvent("resuming_from_scratch", "reason")
LOG_DIR_FULL = LogEvent("log_dir_full", "reason")

# --- generations -----------------------------------------------------------------------------------
RENDEZVOUS_WAITING = LogEvent("rendezvous_waiting", "generation nodes waiting_for timeout_s")
GENERATION_STARTED = LogEvent("generation_started", "generation nproc load_folder agent_pid agent_started_ahead")
TRAINING_STARTED = LogEvent("training_started", "generation mode pid")  # --data-parallel: one long generation
TRAINING_REACHED = LogEvent("training_reached", "generation after_s")
# a node joined the job's generation instead of its own:
GENERATION_JOINED = LogEvent("generation_joined", "generation instead_of failures")
SWITCH_WRITTEN = LogEvent("switch_written", "generation switch file")
COMPLETION_MARKER_SEEN = LogEvent("completion_marker_seen", "generation grace_s")
GENERATION_ENDED = LogEvent("generation_ended", "exit", ENDED)
GENERATION_FAILED = LogEvent("generation_failed", "error failed_ranks exit_codes reached_training", ENDED, WORKER,
                             CAUSE)
GENERATION_STOPPED = LogEvent("generation_stopped", "cause reason exit_codes", ENDED, WORKER, CAUSE)
# a restructure inside the running workers (--restructure in-process), as rank 0 recorded it:
IN_PROCESS_UNUSED = LogEvent("in_process_unused", "generation switch_files hint")
RESTRUCTURED_IN_PROCESS = LogEvent("restructured_in_process", "generation switch file resumed_s rewrap_s ranks "
                                   "parameters memory_before memory_after dendrites")
DENDRITES_PAST_MAXIMUM = LogEvent("dendrites_past_maximum", "generation dendrites max_dendrites limit_from hint")
DENDRITES_ADDED = LogEvent("dendrites_added", "generation dendrites switch_files added")
DENDRITES_REJECTED = LogEvent("dendrites_rejected", "generation dendrites switch_files taken_back")
WORKER_LOG_TAIL = LogEvent("worker_log_tail", "rank node host tail log_line")
WORKERS_NOT_STARTED = LogEvent("workers_not_started", "generation agent_pid reason")
RETRY_SCHEDULED = LogEvent("retry_scheduled", "delay_s retry_in_s failures max_failures reason")
STALL_DETECTED = LogEvent("stall_detected", "generation idle_s action")

# --- the agent -------------------------------------------------------------------------------------
AGENT_READY = LogEvent("agent_ready", "agent_pid workers took_s torch python preloaded not_preloaded forkserver_pid "
                                      "fell_back")
AGENT_EXITED = LogEvent("agent_exited", AGENT_EXIT)
AGENT_REPLACED = LogEvent("agent_replaced", "new_agent_pid", AGENT_EXIT)
AGENT_HUNG = LogEvent("agent_hung", "generation agent_pid silent_s reason action")
FORKSERVER_RESTARTED = LogEvent("forkserver_restarted", "agent_pid forkserver_pid reason")
WARM_WORKERS_REFUSED = LogEvent("warm_workers_refused", "agent_pid workers reason")

# --- the job (several nodes, Slurm) ----------------------------------------------------------------
JOB_NODES = LogEvent("job_nodes", "nodes job_id serving_store store_backend")
JOB_SETUP_FAILED = LogEvent("job_setup_failed", "error")
JOB_STOP_ANNOUNCED = LogEvent("job_stop_announced", "reason told")
JOB_STOP_SEEN = LogEvent("job_stop_seen", "reason")
JOB_STORE_LOST = LogEvent("job_store_lost", "reason")
SLURM_JOB = LogEvent("slurm_job", "job_id restart_count requeue_on")
JOB_REQUEUED = LogEvent("job_requeued", "job_id evidence")
REQUEUE_FAILED = LogEvent("requeue_failed", "job_id error")

#: Every event pai-launch logs, by name.
EVENTS: Mapping[str, LogEvent] = {str(value): value for value in dict(globals()).values()
                                  if isinstance(value, LogEvent)}
#: Every event name pai-launch logs.
ALL: frozenset[str] = frozenset(EVENTS)


def undeclared(record: Mapping[str, object]) -> list[str]:
    """The problems of one logged record against the vocabulary: an unknown event, or fields it does not declare."""
    name = record.get("event")
    event = EVENTS.get(name) if isinstance(name, str) else None
    if event is None:
        return [f"unknown event {name!r}"]
    return [f"{name}: field {key!r} is not declared" for key in sorted(set(record) - event.fields - COMMON)]
