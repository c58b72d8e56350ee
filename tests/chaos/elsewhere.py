"""Faults tested outside the chaos scenarios: where a fault needs its own harness (a second user, a closed
terminal, a paused process, two nodes), its test lives in its tier, and this register names it so that the
README's fault table (`python -m scripts.chaos --markdown`) lists every fault pai-launch is tested against.

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
    Tested("a worker's grandchild in its own session", "swept when the run completes",
           "tests/proc/test_launch_orphans.py::test_grandchild_in_its_own_session_is_swept_when_the_run_completes"),
    Tested("a bug inside pai-launch mid-generation", "every worker stopped and swept, exit 70, the traceback logged",
           "tests/proc/test_launch_internal_error.py::test_a_bug_mid_generation_stops_and_sweeps_every_worker_and_exits_70"),
    Tested("SIGTERM after a stall was killed and retried", "SIGKILL at the grace deadline, the stop finishes",
           "tests/proc/test_launch_stop_after_kill.py::"
           "test_sigterm_after_a_stall_was_killed_and_retried_is_followed_by_sigkill_at_the_grace_deadline"),
    Tested("pai-launch starts in other PID namespaces beside a warm run", "the warm run's private folders are left alone",
           "tests/proc/test_private_folders.py::"
           "test_a_warm_runs_folders_survive_pai_launch_starts_in_other_pid_namespaces"),
    Tested("a node killed mid-generation (two nodes)", "the other node's workers stop; its restart rejoins the job",
           "tests/proc/test_multinode_faults.py::"
           "test_a_node_killed_mid_generation_stops_the_others_workers_and_its_restart_rejoins_the_job"),
)
