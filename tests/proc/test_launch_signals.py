"""Signals sent to a running pai-launch, with real processes: stop signals forwarded once to every worker (their
grandchildren swept), the init run stopped, a terminal's Ctrl+C reaching each process once, SIGUSR1/2 passed on, a
stop at any moment, a SIGTERM to every process of the run at once (warm workers keep their time to stop). What the
run makes of them (a stop is no failure, a rank crashing on its way out, workers that ignore SIGTERM, a second
Ctrl+C, workers lingering after the marker) is played as histories in tests/unit/test_histories_signals.py."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from pai_launch.status import gather
from tests.helpers import is_live, wait_until

pytestmark = pytest.mark.timeout(60)


def _forwarded_pids(launch, name: str) -> list[int]:
    return [pid for event in launch.events("signal_forwarded") if event["signal"] == name for pid in event["pids"]]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_stop_signal_mid_generation_is_forwarded_once_and_exits_128_plus_n(scene, signum):
    grace = 10.0
    launch = scene.start("--nproc", "2", "--grace", str(grace), script_args=["--hang", "--spawn-grandchild"])
    ready = scene.wait_ready(1, 2)
    workers = {pid for pid, _ in ready.values()}
    grandchildren = [psutil.Process(gc) for _, gc in ready.values()]

    sent = launch.send(signum)
    rc = launch.wait(30)

    assert rc == 128 + signum, launch.log_summary()
    assert launch.ended - sent < grace, "the workers exited at once; pai-launch must not wait out the grace period"
    received = launch.event("signal_received")
    assert (received["signal"], received["phase"]) == (signum.name, "training")
    # pai-launch forwarded the signal exactly once to each worker, and never needed SIGKILL.
    assert sorted(_forwarded_pids(launch, signum.name)) == sorted(workers)
    assert "run_killed" not in launch.event_names()
    seen = scene.signals()
    assert sorted(seen) == [0, 1]
    assert all(names == [signum.name] for names in seen.values()), seen  # and none from torch's launcher
    finished = launch.event("run_finished")
    assert finished["exit_code"] == 128 + signum and signum.name in finished["reason"]
    # The sleepers the workers started in their own sessions were swept before pai-launch exited.
    assert not [gc.pid for gc in grandchildren if is_live(gc)]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_worker_still_stopping_after_its_peer_has_exited_gets_no_second_signal(scene, both_modes, signum):
    # Rank 0 exits at once on the signal; rank 1 takes 2 s (a checkpoint written in its handler). torch's launcher
    # takes rank 0's exit for a failure and stops the survivors itself: without care, rank 1 gets a second signal
    # (torch's SIGTERM) in the middle of its own stop, which a real script's handler may not survive.
    stops = scene.io / "stops.log"
    launch = scene.start("--nproc", "2", "--grace", "20",
                         script_args=["--hang", "--exit-delay", "2", "--exit-delay-rank", "1",
                                      "--stop-log", str(stops)])
    scene.wait_ready(1, 2)

    launch.send(signum)
    rc = launch.wait(40)

    assert rc == 128 + signum, launch.log_summary()
    assert scene.signals() == {0: [signum.name], 1: [signum.name]}, launch.log_summary()
    assert sorted(stops.read_text().split("\n")[:-1]) == [f"0 {signum.name}", f"1 {signum.name}"]
    assert "run_killed" not in launch.event_names()
    assert launch.event("generation_stopped")["cause"] == signum.name


@pytest.mark.parametrize("phase", ["init"])
def test_a_stop_signal_is_logged_shown_and_counted_as_a_stop_not_a_failure(scene, phase):
    script_args = ["--hang-init"] if phase == "init" else ["--hang", "--heartbeat", "0.1"]
    launch = scene.start("--nproc", "2", "--grace", "10", script_args=script_args)
    if phase == "init":
        scene.wait_ready(0, 1)
    else:
        scene.wait_ready(1, 2)
        wait_until(lambda: "training_reached" in launch.event_names(), 30, message="training_reached")

    launch.send(signal.SIGTERM)
    rc = launch.wait(30)

    assert rc == 143, launch.log_summary()
    names = launch.event_names()
    assert not {"generation_failed", "worker_log_tail", "init_output_tail"} & set(names), launch.log_summary()
    if phase == "init":
        ended = launch.event("init_exited")
    else:
        ended = launch.event("generation_stopped")
        assert (ended["generation"], ended["cause"], ended["reason"]) == (1, "SIGTERM", "stopped by SIGTERM")
        assert not {"rank", "log_line", "tail"} & set(ended)
    assert (ended["level"], ended["stopped_by" if phase == "init" else "cause"]) == ("info", "SIGTERM")
    finished = launch.event("run_finished")
    assert (finished["level"], finished["stopped_by"], finished["reason"]) == ("info", "SIGTERM", "stopped by SIGTERM")
    if phase == "init":  # the script wrote no save folder before it was stopped: pai-launch made none either
        assert not (scene.work / "PAI").exists(), scene.work_listing()
        return
    shown = gather.gather(scene.work / "PAI")
    assert shown.failures == 0 and shown.exit_reason == "stopped by SIGTERM"
    assert shown.phase == "stopped as asked: exit code 143 (stopped by SIGTERM)"
    assert [(g.number, g.outcome) for g in shown.generations] == [(1, "stopped")]


@pytest.mark.parametrize("phase", ["init", "training"])
def test_ctrl_c_to_the_terminal_process_group_reaches_each_process_once(scene, phase):
    # A terminal's Ctrl+C signals the whole foreground process group. The run's processes live in their own
    # sessions, so they get SIGINT only from pai-launch: once, not twice.
    script_args = ["--hang-init"] if phase == "init" else ["--hang"]
    launch = scene.start("--nproc", "2", "--grace", "10", script_args=script_args, new_session=True)
    generation, count = (0, 1) if phase == "init" else (1, 2)
    scene.wait_ready(generation, count)

    os.killpg(launch.pid, signal.SIGINT)
    rc = launch.wait(30)

    assert rc == 130, launch.log_summary()
    seen = scene.signals()
    assert sorted(seen) == list(range(count))
    assert all(names.count("SIGINT") == 1 for names in seen.values()), seen
    assert len(launch.events("signal_received")) == 1


@pytest.mark.parametrize("moment", ["init_started", "init_exited", "generation_started", "generation_ended"])
def test_sigterm_at_any_moment_stops_the_run_without_waiting_out_the_grace(scene, moment):
    # The generation that runs (or starts) when the signal arrives hangs until signalled. Workers that appear
    # after the signal must get it too, as they appear: otherwise they would run until the SIGKILL at --grace.
    grace = 8.0
    hang = "2" if moment == "generation_ended" else "1"
    launch = scene.start("--nproc", "2", "--grace", str(grace),
                         script_args=["--hang-generation", hang, "--generations", "3"])
    wait_until(lambda: moment in launch.event_names(), 45, interval=0.005, message=moment)

    sent = launch.send(signal.SIGTERM)
    rc = launch.wait(30)

    assert rc == 143, launch.log_summary()
    assert launch.ended - sent < grace, launch.log_summary()
    assert "run_killed" not in launch.event_names()
    assert launch.event("run_finished")["exit_code"] == 143


def test_sigterm_during_the_init_run_is_forwarded_to_it_and_exits_143(scene):
    launch = scene.start("--nproc", "2", "--grace", "10", script_args=["--hang-init"])
    scene.wait_ready(0, 1)

    launch.send(signal.SIGTERM)
    rc = launch.wait(30)

    assert rc == 143, launch.log_summary()
    assert scene.signals() == {0: ["SIGTERM"]}
    assert launch.event("signal_received")["phase"] == "init"
    assert "generation_started" not in launch.event_names()
    assert [record["init"] for record in scene.records()] == [True]


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGUSR2], ids=lambda s: s.name)
def test_sigusr_is_forwarded_to_the_workers_and_the_run_goes_on_to_complete(scene, signum):
    launch = scene.start("--nproc", "2", "--grace", "5",
                         script_args=["--generations", "2", "--hold-until", str(scene.hold_file)])
    ready = scene.wait_ready(1, 2)

    launch.send(signum)
    wait_until(lambda: all(signum.name in names for names in scene.signals().values()) and len(scene.signals()) == 2,
               20, message=f"both ranks to log {signum.name}")
    scene.hold_file.touch()
    rc = launch.wait(60)

    assert rc == 0, launch.log_summary()
    assert scene.signals() == {0: [signum.name], 1: [signum.name]}
    assert sorted(_forwarded_pids(launch, signum.name)) == sorted(pid for pid, _ in ready.values())
    assert [e["generation"] for e in launch.events("generation_started")] == [1, 2]
    assert (scene.work / "PAI" / ".training_complete").is_file()

def test_sigterm_to_every_process_of_the_run_at_once_leaves_each_warm_worker_the_time_it_takes_to_stop(scene):
    # Slurm's scancel and a control-group stop send SIGTERM to every process of the job step or unit at once, the
    # agent's forkserver included. Were the server to die of it, every warm worker would be SIGKILLed (they die with
    # their server) in the middle of its own stop, whatever the grace.
    stops = scene.io / "stops.log"
    launch = scene.start("--nproc", "2", "--grace", "20",
                         script_args=["--hang", "--exit-delay", "2", "--stop-log", str(stops)])
    scene.wait_ready(1, 2)

    tree = [launch.pid, *(child.pid for child in psutil.Process(launch.pid).children(recursive=True))]
    for pid in tree:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    rc = launch.wait(30)

    assert rc == 143, launch.log_summary()
    assert sorted(scene.signals()) == [0, 1]
    left = {line.split()[0] for line in stops.read_text().splitlines()} if stops.exists() else set()
    assert left == {"0", "1"}, "a worker was killed before the end of its own stop"
