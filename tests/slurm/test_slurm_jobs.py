"""pai-launch as a real Slurm job: scripts/slurm/pai-launch.sbatch submitted with sbatch to the local test cluster
(one node, or two fake nodes node1/node2 on this machine), run to completion, cancelled, resubmitted, requeued."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import FAKE_TRAINER, REPO, json_events, processes_mentioning, wait_until, wait_until_empty
from tests.proc.launch_files import read_state

SBATCH = REPO / "scripts" / "slurm" / "pai-launch.sbatch"
PAI_LAUNCH = Path(sys.executable).parent / "pai-launch"


class Job:
    """One test's working folder (the shared save folder lives in work/) and what its trainers report."""

    def __init__(self, cluster, root: Path) -> None:
        self.cluster, self.root = cluster, root
        self.work, self.io = root / "work", root / "io"
        for folder in (self.work, self.io / "records", self.io / "ready", root / "tmp"):
            folder.mkdir(parents=True, exist_ok=True)
        self.hold = self.io / "release"
        self.env = {**cluster.env, "PAI_LAUNCH": str(PAI_LAUNCH), "TMPDIR": str(root / "tmp"),
                    "CUDA_VISIBLE_DEVICES": "",
                    "PYTHONDONTWRITEBYTECODE": "1"}

    def trainer_args(self, *extra: str) -> list[str]:
        return [str(FAKE_TRAINER), "--record", str(self.io / "records"), "--ready-dir", str(self.io / "ready"),
                "--signal-log", str(self.io / "signals.log"), *extra]

    def submit(self, *pai_args: str, script: Path = SBATCH, options: tuple[str, ...] = (),
               trainer: tuple[str, ...] = ()) -> str:
        command = ["sbatch", "--parsable", *options, str(script), "--log-format", "json", *pai_args,
                   *self.trainer_args(*trainer)]
        done = subprocess.run(command, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"sbatch failed: {done.stderr}"
        return done.stdout.strip().split(";")[0]

    def log(self, job_id: str) -> str:
        path = self.work / f"pai-launch-{job_id}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def events(self, job_id: str, name: str | None = None, node: int | None = None) -> list[dict]:
        return [e for e in json_events(self.log(job_id), name) if node is None or e.get("node", 0) == node]

    def workers(self) -> list[dict]:
        records = [json.loads(path.read_text()) for path in (self.io / "records").glob("*.json")]
        return [r for r in records if not r["init"]]

    def signals(self) -> list[tuple[str, str]]:
        path = self.io / "signals.log"
        return [tuple(line.split()) for line in path.read_text().splitlines()] if path.exists() else []

    def ready(self, count: int, timeout: float = 60) -> None:
        wait_until(lambda: len(list((self.io / "ready").glob("1-*"))) >= count, timeout,
                   message=f"{count} worker(s) of generation 1 running")

    def nothing_left(self, within: float = 30) -> None:
        left = wait_until_empty(lambda: processes_mentioning(str(self.root)), within)
        assert left == [], f"left running: {left}"


@pytest.fixture
def job(slurm_cluster, tmp_path):
    return Job(slurm_cluster, tmp_path)


@pytest.mark.timeout(120)
def test_the_example_job_runs_to_completion_on_one_node(job):
    job_id = job.submit("--nproc", "2", options=("--nodes=1",), trainer=("--generations", "3"))
    job.cluster.wait_state(job_id, "COMPLETED", timeout=90)

    finished = job.events(job_id, "run_finished")
    assert [e["exit_code"] for e in finished] == [0], job.log(job_id)[-3000:]
    assert job.events(job_id, "slurm_job")[0]["job_id"] == job_id
    assert {r["env"]["WORLD_SIZE"] for r in job.workers()} == {"2"}
    assert (job.work / "PAI" / ".training_complete").is_file()
    job.nothing_left()


@pytest.mark.timeout(150)
def test_the_example_job_runs_to_completion_on_two_nodes(job):
    job_id = job.submit("--nproc", "1", trainer=("--generations", "3"))
    job.cluster.wait_state(job_id, "COMPLETED", timeout=120)

    finished = job.events(job_id, "run_finished")
    assert sorted((e["node"], e["exit_code"]) for e in finished) == [(0, 0), (1, 0)], job.log(job_id)[-3000:]
    nodes = {e["node"]: e for e in job.events(job_id, "job_nodes")}
    port = 29400 + int(job_id) % 1000
    assert all(f"rendezvous store at node1:{port}" in e["nodes"] for e in nodes.values())
    assert nodes[0]["serving_store"] is True and nodes[1]["serving_store"] is False
    assert {e["job_id"] for e in nodes.values()} == {f"slurm-{job_id}"}
    by_generation = {}
    for record in job.workers():
        by_generation.setdefault(record["env"]["PAI_LAUNCH_GENERATION"], set()).add(record["env"]["RANK"])
    assert by_generation == {"1": {"0", "1"}, "2": {"0", "1"}, "3": {"0", "1"}}
    assert read_state(job.work / "PAI")["last_exit"]["code"] == 0
    job.nothing_left()


@pytest.mark.timeout(200)
def test_scancel_mid_generation_leaves_nothing_and_a_resubmission_resumes(job):
    # Slurm sends SIGTERM to every process of the job step at once, the agents' forkservers included: each worker
    # still gets the time its own stop takes (2 s here), not cut off by its server's death.
    stops = job.io / "stops.log"
    trainer = ("--generations", "3", "--hold-until", str(job.hold), "--exit-delay", "2", "--stop-log", str(stops))
    job_id = job.submit("--nproc", "1", trainer=trainer)
    job.ready(2)
    job.cluster.scancel(job_id)
    job.cluster.wait_state(job_id, "CANCELLED", timeout=60)

    job.nothing_left()
    state = read_state(job.work / "PAI")
    assert state["generation"] == 1 and state["last_exit"]["code"] == 143, state
    assert {(rank, name) for rank, name in job.signals()} == {("0", "SIGTERM"), ("1", "SIGTERM")}
    assert {line.split()[0] for line in stops.read_text().splitlines()} == {"0", "1"}, "a worker was cut off"

    job.hold.touch()
    again = job.submit("--nproc", "1", trainer=trainer)  # the same command, as a resubmission is
    job.cluster.wait_state(again, "COMPLETED", timeout=120)
    started = job.events(again, "run_started")
    assert sorted((e["node"], e["resumed"], e["generation"]) for e in started) == [(0, True, 1), (1, True, 1)]
    # Generation 1 was cancelled before any switch file; the resumed run goes on from 2 and completes in 3.
    assert [e["generation"] for e in job.events(again, "generation_started", node=0)] == [2, 3]
    assert read_state(job.work / "PAI")["last_exit"]["code"] == 0
    job.nothing_left()


SLOW_TO_EXIT_SCONTROL = """\
#!/bin/sh
# The real scontrol; after a requeue it lingers, so Slurm's SIGTERM to the job's processes (sent as the requeue takes
# effect) ends it before it exits 0: what a loaded node does to the real one now and then.
{real} "$@"
status=$?
if [ "$1" = requeue ]; then sleep 30; fi
exit $status
"""


@pytest.mark.slow
@pytest.mark.timeout(360)
def test_the_warning_signal_stops_the_job_which_requeues_itself_and_resumes(job):
    # Slurm kills `scontrol requeue` as it requeues the job: pai-launch still knows the job was requeued (Slurm counts
    # the restart) and says so, with no requeue_failed.
    folder = job.root / "bin"
    folder.mkdir()
    real = shutil.which("scontrol", path=job.env["PATH"])
    assert real, "scontrol is not on PATH"
    (folder / "scontrol").write_text(SLOW_TO_EXIT_SCONTROL.format(real=real))
    (folder / "scontrol").chmod(0o755)
    job.env["PATH"] = f"{folder}{os.pathsep}{job.env['PATH']}"
    job_id = job.submit("--nproc", "1", trainer=("--generations", "3", "--hold-until", str(job.hold)))
    job.ready(2)
    job.cluster.scancel(job_id, "--batch", "--signal=USR1")  # what sbatch --signal=B:USR1@SECONDS sends

    wait_until(lambda: "Restarts=1" in job.cluster.show_job(job_id), 60, message="the job to be requeued")
    # Slurm may count the requeue before pai-launch has written its last lines (it logs job_requeued once scontrol
    # returned, and run_finished as it exits): wait for both nodes' last lines.
    wait_until(lambda: len(json_events(job.log(job_id), "run_finished")) == 2, 60, message="both nodes' run_finished")
    first_run = job.log(job_id)
    assert [e["node"] for e in json_events(first_run, "job_requeued")] == [0], first_run[-3000:]
    assert "scontrol requeue was killed by SIGTERM" in json_events(first_run, "job_requeued")[0]["evidence"]
    assert json_events(first_run, "requeue_failed") == []
    assert sorted((e["node"], e["exit_code"]) for e in json_events(first_run, "run_finished")) == [(0, 138), (1, 138)]
    # Each worker got SIGUSR1 once (Slurm signals the whole job step; pai-launch does not hand it on twice), then
    # SIGTERM.
    assert sorted(job.signals()) == [("0", "SIGTERM"), ("0", "SIGUSR1"), ("1", "SIGTERM"), ("1", "SIGUSR1")]
    job.nothing_left()

    job.hold.touch()
    job.cluster.wait_state(job_id, "COMPLETED", timeout=280, give_up_on=())  # Slurm holds a requeued job ~2 min
    restarts = [e for e in job.events(job_id, "slurm_job") if e["restart_count"] == 1]
    assert len(restarts) == 2, "both nodes ran again as the requeued job"
    resumed = [e for e in job.events(job_id, "run_started") if e["resumed"]]
    assert sorted(e["node"] for e in resumed) == [0, 1]
    assert read_state(job.work / "PAI")["last_exit"]["code"] == 0
    job.nothing_left()


SIGNAL_JOB = """\
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --output=pai-launch-%j.log
exec srun "$PAI_LAUNCH" "$@"
"""


@pytest.mark.timeout(150)
def test_slurms_warning_signal_to_the_batch_step_reaches_the_workers_and_the_job_goes_on(job):
    # Sent once both workers run, as sbatch --signal=B:USR1@SECONDS sends it: Slurm sends that one up to a minute
    # early, so a job short enough for a test could get it before any worker has started on a loaded machine.
    script = job.root / "signal.sbatch"
    script.write_text(SIGNAL_JOB)
    job_id = job.submit("--nproc", "1", script=script, trainer=("--generations", "2", "--hold-until", str(job.hold)))
    job.ready(2)
    job.cluster.scancel(job_id, "--batch", "--signal=USR1")
    wait_until(lambda: len([s for s in job.signals() if s[1] == "SIGUSR1"]) >= 2, 90,
               message="Slurm's SIGUSR1 to reach both workers")
    job.hold.touch()
    job.cluster.wait_state(job_id, "COMPLETED", timeout=60)

    assert [e["signal"] for e in job.events(job_id, "signal_received")] == ["SIGUSR1", "SIGUSR1"]
    assert sorted(s for s in job.signals()) == [("0", "SIGUSR1"), ("1", "SIGUSR1")]
    job.nothing_left()


NO_SRUN_JOB = """\
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --output=pai-launch-%j.log
exec "$PAI_LAUNCH" "$@"
"""


@pytest.mark.timeout(90)
def test_a_multi_node_job_without_srun_is_refused_with_one_line(job):
    script = job.root / "no-srun.sbatch"
    script.write_text(NO_SRUN_JOB)
    job_id = job.submit("--nproc", "1", script=script)
    job.cluster.wait_state(job_id, "FAILED", timeout=60)

    lines = [line for line in job.log(job_id).splitlines() if line.strip()]
    assert len(lines) == 1 and "not running under srun" in lines[0] and "srun --ntasks-per-node=1" in lines[0], lines
    assert "ExitCode=2:0" in job.cluster.show_job(job_id)
    assert job.workers() == []
