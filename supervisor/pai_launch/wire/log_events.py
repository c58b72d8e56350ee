"""The names of the events pai-launch logs (its JSON lines, `SAVE/.pai-launch/events.jsonl`): a protocol between
the supervisor that writes them and every reader (`pai-launch status`, the metrics, the live status line, the
tests, and users' own alerting). Writers and readers name them through these constants, and
tests/unit/test_log_events.py fails on a name written or read anywhere that is not defined here.
"""

from __future__ import annotations

# --- the run -------------------------------------------------------------------------------------
RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"
RUN_KILLED = "run_killed"  # processes still there after the grace: SIGKILLed
ALREADY_COMPLETE = "already_complete"
INTERNAL_ERROR = "internal_error"
LEFTOVERS_KILLED = "leftovers_killed"
SUPERVISOR_RESUMED = "supervisor_resumed"  # pai-launch itself was paused (SIGSTOP, a frozen VM) and goes on
CONSOLE_LOST = "console_lost"
STACK_DUMP = "stack_dump"
METRICS_SERVING = "metrics_serving"
METRICS_UNAVAILABLE = "metrics_unavailable"

# --- signals ---------------------------------------------------------------------------------------
SIGNAL_RECEIVED = "signal_received"
SIGNAL_FORWARDED = "signal_forwarded"
LATE_WORKERS_SIGNALLED = "late_workers_signalled"

# --- the init run ----------------------------------------------------------------------------------
INIT_STARTED = "init_started"
INIT_EXITED = "init_exited"
INIT_OUTPUT_TAIL = "init_output_tail"

# --- the save folder -------------------------------------------------------------------------------
SAVE_FOLDER_ADOPTED = "save_folder_adopted"
ADOPTED_FOLDER_USED = "adopted_folder_used"
ADOPTION_NOT_RECORDED = "adoption_not_recorded"
SAVE_FOLDER_MOVED_ASIDE = "save_folder_moved_aside"
SAVE_FOLDER_REMADE = "save_folder_remade"
SAVE_FOLDER_FAILED = "save_folder_failed"
SAVE_LOCK_SQUATTED = "save_lock_squatted"
CHECKPOINT_QUARANTINED = "checkpoint_quarantined"
RESUMING_FROM_SCRATCH = "resuming_from_scratch"
LOG_DIR_FULL = "log_dir_full"

# --- generations -----------------------------------------------------------------------------------
GENERATION_STARTED = "generation_started"
TRAINING_STARTED = "training_started"  # --data-parallel: one long generation
TRAINING_REACHED = "training_reached"
GENERATION_JOINED = "generation_joined"  # a node joined the job's generation instead of its own
SWITCH_WRITTEN = "switch_written"
COMPLETION_MARKER_SEEN = "completion_marker_seen"
GENERATION_ENDED = "generation_ended"
GENERATION_FAILED = "generation_failed"
GENERATION_STOPPED = "generation_stopped"
DENDRITES_ADDED = "dendrites_added"
DENDRITES_REJECTED = "dendrites_rejected"
WORKER_LOG_TAIL = "worker_log_tail"
WORKERS_NOT_STARTED = "workers_not_started"
RETRY_SCHEDULED = "retry_scheduled"
STALL_DETECTED = "stall_detected"

# --- the agent -------------------------------------------------------------------------------------
AGENT_READY = "agent_ready"
AGENT_EXITED = "agent_exited"
AGENT_REPLACED = "agent_replaced"
AGENT_HUNG = "agent_hung"
FORKSERVER_RESTARTED = "forkserver_restarted"
WARM_WORKERS_REFUSED = "warm_workers_refused"

# --- the job (several nodes, Slurm) ----------------------------------------------------------------
JOB_NODES = "job_nodes"
JOB_SETUP_FAILED = "job_setup_failed"
JOB_STOP_ANNOUNCED = "job_stop_announced"
JOB_STOP_SEEN = "job_stop_seen"
JOB_STORE_LOST = "job_store_lost"
SLURM_JOB = "slurm_job"
JOB_REQUEUED = "job_requeued"
REQUEUE_FAILED = "requeue_failed"

#: Every event name pai-launch logs.
ALL: frozenset[str] = frozenset(value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str))
