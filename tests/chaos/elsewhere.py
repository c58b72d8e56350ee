"""Faults tested outside the chaos scenarios: where a fault needs its own harness (a second user, a closed
terminal, a paused process, two nodes), its test lives in its tier, and this register names it so that the
The fault table of docs/users/faults-tested.md (`python -m scripts.chaos --markdown`) lists every fault pai-launch is
tested against.

Each entry names one test as `path::function`; tests/unit/test_fault_table.py checks that every named test exists.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tested:
    fault: str
    outcome: str
    #: `tests/...py::test_function`
    test: str


ELSEWHERE: tuple[Tested, ...] = (
    Tested("kill -9 of the agent or its forkserver (warm)", "the warm workers go with it, the generation is retried",
           "tests/proc/test_launch_orphans.py::test_kill_9_of_the_agent_or_its_forkserver_takes_the_warm_workers_with_it"),
    Tested("SIGTERM to every process of the run at once (Slurm's scancel, a control-group stop)",
           "each warm worker gets the time its own stop takes (its forkserver lives on), exit 143",
           "tests/proc/test_launch_signals.py::"
           "test_sigterm_to_every_process_of_the_run_at_once_leaves_each_warm_worker_the_time_it_takes_to_stop"),
    Tested("a stop signal that reaches a warm worker between its fork and its script's start",
           "held by the forkserver's signal mask, not lost: the worker dies of it before the script runs, as a fresh "
           "interpreter would",
           "tests/proc/test_warm_workers.py::"
           "test_a_signal_that_reaches_a_warm_worker_as_it_starts_ends_it_before_the_script_runs"),
    Tested("Slurm kills `scontrol requeue` as it requeues the job (--requeue-on; a slow scontrol on PATH)",
           "job_requeued, its evidence Slurm's count of restarts, no requeue_failed; the requeued job resumes",
           "tests/slurm/test_slurm_jobs.py::test_the_warning_signal_stops_the_job_which_requeues_itself_and_resumes"),
    Tested("one rank fails; the agent stops another, whose end is seen first (a late watch and torch, a fault hook)",
           "the failed rank is named, its own exit code; the stopped one comes after it",
           "tests/proc/test_launch_blame.py::"
           "test_the_rank_that_failed_is_blamed_not_the_one_torch_stopped_whose_end_was_seen_first"),
    Tested("a stop signal; one rank exits at once, another takes 2 s to stop (torch sees a failure)",
           "each worker gets the signal once, none a second from torch's launcher; 128+N",
           "tests/proc/test_launch_signals.py::"
           "test_a_worker_still_stopping_after_its_peer_has_exited_gets_no_second_signal"),
    Tested("a worker's grandchild in its own session", "swept when the run completes",
           "tests/proc/test_launch_orphans.py::test_grandchild_in_its_own_session_is_swept_when_the_run_completes"),
    Tested("a bug inside pai-launch mid-generation", "every worker stopped and swept, exit 70, the traceback logged",
           "tests/proc/test_launch_internal_error.py::test_a_bug_mid_generation_stops_and_sweeps_every_worker_and_exits_70"),
    Tested("SIGTERM after a stall was killed and retried", "SIGKILL at the grace deadline, the stop finishes",
           "tests/unit/test_histories_stop_after_kill.py::"
           "test_sigterm_after_a_stall_was_killed_and_retried_is_followed_by_sigkill_at_the_grace_deadline"),
    Tested("pai-launch starts in other PID namespaces beside a warm run", "the warm run's private folders are left "
           "alone",
           "tests/proc/test_private_folders.py::"
           "test_a_warm_runs_folders_survive_pai_launch_starts_in_other_pid_namespaces"),
    Tested("a killed node's agent lingers while it kills its workers on the way out",
           "its workers' SIGKILLs are not published as the generation's failure: every node names the node as lost",
           "tests/proc/test_multinode_faults.py::"
           "test_the_workers_a_killed_nodes_agent_ends_on_its_way_out_are_not_taken_for_the_generations_failure"),
    Tested("node 1 of two killed mid-generation", "node 0 stops its workers; node 1 restarted rejoins the job",
           "tests/proc/test_multinode_faults.py::"
           "test_a_node_killed_mid_generation_stops_the_others_workers_and_its_restart_rejoins_the_job"),
    Tested("a node killed at any point of publishing its generation's outcome",
           "its watcher still stops every node and reads an outcome for it: its own, whole, or lost",
           "tests/unit/test_ring_watch.py::"
           "test_a_node_killed_at_any_point_of_publishing_its_failure_is_still_found_by_its_watcher"),
    Tested("ranks flood their output, warm and cold", "the agent's memory stays flat; every rank's last line relayed",
           "tests/proc/test_launch_flood.py::"
           "test_ranks_that_flood_their_output_end_with_0_their_last_lines_relayed_and_the_agent_bounded"),
    Tested("two runs, one after another, on one --log-dir", "each start has its own folder; each sees only its own "
           "lines",
           "tests/proc/test_launch_log_dir.py::test_two_runs_one_after_another_on_one_log_dir_each_see_only_their_own"),
    Tested("a --fresh rerun on the same --log-dir", "its own folder; exit 0 with only its own lines",
           "tests/proc/test_launch_log_dir.py::test_a_fresh_rerun_on_the_same_log_dir_sees_only_its_own"),
    Tested("two runs at the same time on one --log-dir", "each sees only its own workers and lines; both exit 0",
           "tests/proc/test_launch_log_dir.py::test_two_runs_at_the_same_time_on_one_log_dir_each_see_only_their_own"),
    Tested("an option in seconds given nan, inf or out of range", "one line naming the option and a good value, exit 2",
           "tests/proc/test_launch_usage_faults.py::test_a_bad_number_of_seconds_is_one_line_exit_2_and_nothing_started"),
    Tested("a script named -train.py", "run as ./-train.py, never read as an option; trains to completion",
           "tests/proc/test_launch_usage_faults.py::"
           "test_a_script_named_like_an_option_runs_as_a_file_and_trains_to_completion"),
    Tested("the working directory removed before the start", "one line, exit 2, nothing started",
           "tests/proc/test_launch_usage_faults.py::test_a_removed_working_directory_is_one_line_and_exit_2"),
    Tested("--nproc past the open-files limit", "one line naming the most workers that fit and ulimit -n, exit 2",
           "tests/proc/test_launch_usage_faults.py::"
           "test_more_workers_than_the_open_files_limit_holds_is_refused_before_anything_starts"),
    Tested("--nproc above the CPU cores", "a warning; the run goes on",
           "tests/proc/test_launch_usage_faults.py::test_more_workers_than_cpu_cores_is_a_warning_and_the_run_goes_on"),
    Tested("the --log-dir disk fills during a generation", "the failure names the full disk, exit 6, no retry into it",
           "tests/proc/test_launch_usage_faults.py::test_a_log_dir_disk_filling_during_a_generation_names_it_in_the_failure"),
    Tested("--save-name . (the working directory) with --fresh", "one line, exit 2, nothing moved",
           "tests/proc/test_launch_usage_faults.py::"
           "test_the_working_directory_as_the_save_folder_is_refused_and_fresh_moves_nothing"),
    Tested("stdout, stderr or all of fds 0-2 closed at the start, or on /dev/full",
           "/dev/null in their place for every child; failed writes dropped, console_lost once in events.jsonl; exit 0",
           "tests/proc/test_launch_console_lost.py::test_a_console_closed_or_full_from_the_start_never_ends_the_run"),
    Tested("the terminal closed mid-run, then SIGHUP", "SIGHUP forwarded, the workers stop within the grace, exit 129",
           "tests/proc/test_launch_console_lost.py::"
           "test_a_terminal_closed_mid_run_then_sighup_forwards_with_grace_and_exits_129"),
    Tested("SIGQUIT mid-generation", "stack_dump of pai-launch's threads, the workers get SIGTERM, exit 131",
           "tests/proc/test_launch_console_lost.py::"
           "test_sigquit_mid_generation_dumps_the_stacks_then_stops_like_sigterm_and_exits_131"),
    Tested("a bug inside pai-launch while stderr is unwritable", "exit 70 still; internal_error in events.jsonl",
           "tests/proc/test_launch_console_lost.py::"
           "test_a_bug_mid_run_exits_70_with_stderr_unwritable_and_the_events_file_says_why"),
    Tested("another user's socket on the lock's name (listening or only bound)",
           "the run starts and logs save_lock_squatted; a second pai-launch of ours still exits 2",
           "tests/proc/test_launch_local_users.py::"
           "test_another_users_socket_on_the_lock_name_neither_blocks_the_run_nor_lets_a_second_one_in"),
    Tested("another user opens or flocks the lock file", "it cannot (0600, ours): permission denied",
           "tests/proc/test_launch_local_users.py::"
           "test_another_user_can_neither_open_the_lock_file_nor_write_into_the_state_folder"),
    Tested("an old world-readable lock file flocked by another user", "exit 2 naming the real holder, not a dead PID",
           "tests/proc/test_launch_local_users.py::"
           "test_an_old_world_readable_lock_file_flocked_by_another_user_names_the_real_holder_not_the_dead_pid"),
    Tested("a link planted at SAVE/.pai-launch/lock.node0", "one line, exit 2, the link's root-only target untouched",
           "tests/proc/test_launch_local_users.py::"
           "test_a_link_another_user_planted_at_the_lock_file_is_refused_and_its_target_untouched"),
    Tested("SAVE/.pai-launch made by another user", "one line naming its owner, exit 2, nothing written",
           "tests/proc/test_launch_local_users.py::test_a_state_folder_another_user_made_is_refused_in_one_line"),
    Tested("SAVE/.pai-launch a link to a root-only folder", "one line, exit 2, nothing lands where it points",
           "tests/proc/test_launch_local_users.py::"
           "test_a_state_folder_that_is_a_link_is_refused_and_nothing_lands_where_it_points"),
    Tested("a link planted at .pai-launch/quarantine", "the torn checkpoint stays put; exit 6 as for one not movable",
           "tests/unit/test_locks.py::test_a_link_planted_at_the_quarantine_folder_is_refused_and_the_torn_file_stays"),
    Tested("a named pipe as events.jsonl", "one line naming the pipe, exit 2, nothing started, nothing blocks",
           "tests/unit/test_histories_own_files.py::"
           "test_events_jsonl_that_is_no_regular_file_is_named_exit_2_and_nothing_is_started"),
    Tested("a named pipe as events.jsonl, found after the init run", "exit 6 naming the pipe, no generation started",
           "tests/unit/test_histories_own_files.py::"
           "test_a_pipe_as_events_jsonl_found_after_the_init_run_ends_the_run_naming_it"),
    Tested("SIGTERM while events.jsonl is a pipe", "exit 143 at once, never blocked in open()",
           "tests/proc/test_launch_own_files.py::test_sigterm_still_stops_a_run_whose_events_jsonl_is_a_pipe"),
    Tested("a directory as events.jsonl", "one line saying it is a directory, exit 2",
           "tests/unit/test_histories_own_files.py::"
           "test_events_jsonl_that_is_no_regular_file_is_named_exit_2_and_nothing_is_started"),
    Tested("state.json with fields of the wrong type", "one line naming the field, exit 2, moved aside byte for byte",
           "tests/unit/test_histories_own_files.py::"
           "test_a_state_json_with_fields_of_the_wrong_type_is_exit_2_one_line_and_moved_aside"),
    Tested("a 1.5 GB sparse state.json", "refused by its size before it is read, exit 2, moved aside",
           "tests/unit/test_histories_own_files.py::test_a_huge_sparse_state_json_is_refused_without_being_read"),
    Tested("state.json's save_name leading out of the working directory", "one line, exit 2, nothing made outside",
           "tests/proc/test_launch_own_files.py::"
           "test_a_save_name_that_escapes_the_working_directory_is_refused_and_nothing_is_made_outside"),
    Tested("umask 027", "state.json is 0640: pai-launch's files follow the umask",
           "tests/proc/test_launch_own_files.py::test_state_json_follows_the_umask"),
    Tested("a text file as the newest switch file", "moved aside as not a checkpoint; the one before is loaded; exit 0",
           "tests/unit/test_histories_own_files.py::"
           "test_a_text_file_as_the_newest_switch_file_is_quarantined_and_the_one_before_is_loaded"),
    Tested("a whole switch file a rank fails to load, saying why", "the retry moves it aside, quoting the rank's line, "
           "and resumes from the one before",
           "tests/unit/test_histories_own_files.py::"
           "test_a_whole_switch_file_that_no_rank_can_load_is_moved_aside_and_the_one_before_is_resumed"),
    Tested("every switch file unloadable", "each moved aside, progress never taken back; exit 4 once --max-failures "
           "were",
           "tests/unit/test_histories_own_files.py::test_a_script_whose_every_switch_file_no_rank_can_load_ends_with_exit_4"),
    Tested("SIGTERM while the agent is still starting up", "the request is withdrawn, no worker ever starts, exit 143",
           "tests/proc/test_launch_agent_faults.py::test_a_stop_while_the_agent_starts_up_starts_no_worker"),
    Tested("an outside client of the job store sets the stop flag or forges results",
           "ignored: every key is named and every value sealed by the job's secret; the job completes on every node",
           "tests/proc/test_multinode_store.py::"
           "test_an_outside_client_without_the_secret_can_neither_stop_the_job_nor_forge_a_result"),
    Tested("the job store for a 127.0.0.1 endpoint", "listens on 127.0.0.1 only; listing its keys gives no secret away",
           "tests/proc/test_multinode_store.py::"
           "test_the_store_listens_only_on_the_endpoints_address_and_its_keys_do_not_give_the_secret_away"),
    Tested("node 0's store process killed -9 mid-generation", "every node exits 1 within seconds naming the lost store",
           "tests/proc/test_multinode_store.py::"
           "test_node_0s_store_process_killed_mid_generation_ends_every_node_with_exit_1_naming_the_lost_store"),
    Tested("node 0's pai-launch killed -9 mid-generation", "node 1 exits 1 within seconds, not after --rdzv-timeout",
           "tests/proc/test_multinode_faults.py::"
           "test_node_0_killed_mid_generation_ends_node_1_within_seconds_with_exit_1_naming_the_lost_store"),
    Tested("--rdzv-endpoint names an address that is not node 0's", "one line naming it and the fix, exit 2",
           "tests/proc/test_multinode_store.py::"
           "test_node_0_whose_endpoint_is_not_one_of_its_addresses_says_so_and_starts_nothing"),
    Tested("every rank fails at start-up for a transient cause (a store-barrier timeout, the config race)",
           "the switch file is kept, the failure counted once, retried, exit 0",
           "tests/unit/test_histories_blame.py::"
           "test_every_rank_failing_at_start_up_for_a_transient_cause_keeps_the_switch_file"),
    Tested("workers lingering after the completion marker, with --stall-timeout",
           "no stall, no retry: stopped after --grace, exit 0",
           "tests/proc/test_launch_blame.py::test_workers_lingering_after_the_marker_are_stopped_and_the_run_is_complete"),
    Tested("the same command again after a run gave up", "a full failure budget; the first failure retried; "
           "state.json's history",
           "tests/unit/test_histories_blame.py::test_a_new_invocation_gets_a_full_budget_and_state_json_keeps_the_last_one"),
    Tested("a real run adding dendrites past its maximum", "named (log, status); --max-dendrites stops it, exit 0",
           "tests/real/test_runaway.py::test_a_real_runaway_is_named_and_max_dendrites_stops_it"),
    Tested("gloo's buffer-size abort (SIGABRT, no Python frame)", "named as DDP's buffer broadcast, with the fix",
           "tests/real/test_failure_causes_real.py::test_the_gloo_buffer_size_abort_is_named_as_the_buffer_broadcast"),
    Tested("bdb.BdbQuit after PerforatedAI's 'Need to call .module'", "named with the fix, counted as after training",
           "tests/real/test_failure_causes_real.py::test_bdbquit_after_need_to_call_module_is_named_and_counted_as_training"),
    Tested("node 0 whose peer never comes", "rendezvous_waiting, then exit 1 at --rdzv-timeout naming the missing node",
           "tests/proc/test_multinode_waits.py::test_node_0_whose_peer_never_comes_gives_up_at_the_rdzv_timeout_naming_it"),
    Tested("--no-python ./prog with a prog on PATH", "runs ./prog, never PATH's",
           "tests/proc/test_launch_module_program.py::"
           "test_a_program_given_as_dot_slash_runs_that_file_not_one_of_the_same_name_on_path"),
    Tested("a path name over 255 bytes", "one line naming the option, exit 2, nothing started",
           "tests/proc/test_launch_usage_faults.py::"
           "test_a_path_with_a_name_over_255_bytes_is_one_line_exit_2_and_nothing_started"),
    Tested("the save folder's disk full before the start", "exit 6 naming the disk; the init run is not started",
           "tests/proc/test_launch_usage_faults.py::"
           "test_a_save_folder_on_a_full_disk_before_the_start_is_exit_6_naming_the_disk_not_a_failed_init_run"),
    Tested("the agent's import torch hangs", "agent_slow_start at 60 s and each doubling; SIGTERM still ends it, exit "
           "143",
           "tests/proc/test_launch_agent_faults.py::"
           "test_an_agent_whose_import_torch_hangs_is_reported_and_a_stop_still_ends_everything"),
)
