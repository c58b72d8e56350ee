"""The Slurm tier's session fixture: a real two-node Slurm cluster (node1, node2) on loopback, started once per test
session with scripts/slurm/cluster.sh and stopped at the end, also when tests fail.

Both nodes are slurmd daemons on this host, so a job's node identity comes from Slurm's variables (SLURM_NODEID,
SLURM_JOB_NODELIST), never from the hostname. Every client command needs the cluster's SLURM_CONF: run them with
`slurm_cluster.env` or through the helpers here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO

CLUSTER_SH = REPO / "scripts" / "slurm" / "cluster.sh"
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "sinfo", "srun")
TOOLS_HINT = "apt-get install slurmctld slurmd slurm-client munge (./scripts/test.sh does, as root)"
#: States a job does not leave by itself: waiting for another one after these is pointless.
ENDED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                          "BOOT_FAIL", "DEADLINE", "UNKNOWN"})
POLL_S = 0.2
COMMAND_TIMEOUT_S = 30


class SlurmError(AssertionError):
    pass


@dataclass(frozen=True)
class SlurmCluster:
    """A running cluster: `dir` holds its configuration, state and logs (dir/log); `env` is this process's
    environment plus the cluster's SLURM_CONF."""

    dir: Path
    env: dict[str, str]

    def run(self, *command: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm client command against this cluster; with `check`, a non-zero exit raises SlurmError."""
        done = subprocess.run(command, env=self.env, cwd=cwd, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
        if check and done.returncode != 0:
            raise SlurmError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
        return done

    def sbatch(self, script_path: Path | str, *args: str, cwd: Path, options: Sequence[str] = ()) -> str:
        """Submit `script_path` (`args` go to the script, `options` to sbatch before it) from `cwd`; its job id."""
        done = self.run("sbatch", "--parsable", *options, str(script_path), *args, cwd=cwd)
        return done.stdout.strip().split(";")[0]

    def scontrol(self, *args: str) -> str:
        return self.run("scontrol", *args).stdout

    def scancel(self, job_id: str, *flags: str) -> None:
        self.run("scancel", *flags, job_id)

    def show_job(self, job_id: str) -> str:
        """`scontrol show job -o` for `job_id` (one line of Key=Value fields); "" once the job is gone."""
        done = self.run("scontrol", "show", "job", "-o", job_id, check=False)
        if done.returncode != 0:
            if "Invalid job id" in done.stderr:
                return ""
            raise SlurmError(f"scontrol show job {job_id} exited {done.returncode}: {done.stderr}")
        return done.stdout.strip()

    def job_state(self, job_id: str) -> str:
        """PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...; UNKNOWN once Slurm forgot the job."""
        for field in self.show_job(job_id).split():
            key, _, value = field.partition("=")
            if key == "JobState":
                return value
        return "UNKNOWN"

    def wait_state(self, job_id: str, states: str | Iterable[str], timeout: float, *,
                   give_up_on: Iterable[str] = ENDED_STATES) -> str:
        """Poll until the job is in one of `states` (returned). Raise SlurmError, with the job's scontrol output,
        after `timeout` seconds or as soon as it reaches a state of `give_up_on` it cannot leave (pass () to wait
        through those too, e.g. across a requeue)."""
        wanted = {states} if isinstance(states, str) else set(states)
        hopeless = set(give_up_on) - wanted
        deadline = time.monotonic() + timeout
        while True:
            state = self.job_state(job_id)
            if state in wanted:
                return state
            if state in hopeless or time.monotonic() >= deadline:
                why = f"it ended {state}" if state in hopeless else f"still {state} after {timeout} s"
                raise SlurmError(f"job {job_id} never reached {sorted(wanted)}: {why}\n{self.show_job(job_id)}")
            time.sleep(POLL_S)


def _cluster_sh(*args: str) -> subprocess.CompletedProcess:
    # The script bounds its own waits (60 s to start, about 15 s per stop stage); this is a backstop.
    return subprocess.run([str(CLUSTER_SH), *args], capture_output=True, text=True, timeout=180)


def _reap(pids: Iterable[int]) -> None:
    """Collect the exit status of the stopped daemons: after cluster.sh exits they are orphans re-parented to
    this process (a subreaper, see tests/conftest.py), and would stay zombies until the session ends."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def _recorded_pids(folder: Path) -> list[int]:
    try:
        return [int(line.split()[1]) for line in (folder / "pids").read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def _stop(folder: Path) -> None:
    pids = _recorded_pids(folder)
    stopped = _cluster_sh("stop", str(folder))
    _reap(pids)
    if stopped.returncode != 0:
        raise SlurmError(f"cluster.sh stop {folder} exited {stopped.returncode}:\n{stopped.stderr}")


@contextlib.contextmanager
def running_cluster(folder: Path) -> Iterator[SlurmCluster]:
    """A two-node cluster started in folder (on the first free block of ports) and stopped on leaving, also when
    what runs inside fails; SlurmError if it does not start."""
    started = _cluster_sh("start", str(folder), "--nodes", "2")
    if started.returncode != 0:
        _stop(folder)  # cluster.sh stops what it started when it fails; this only makes sure
        raise SlurmError(f"cluster.sh start {folder} exited {started.returncode}:\n{started.stderr}")
    conf = started.stdout.strip().splitlines()[-1].removeprefix("export SLURM_CONF=")
    try:
        yield SlurmCluster(dir=folder, env={**os.environ, "SLURM_CONF": conf})
    finally:
        _stop(folder)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> Iterator[SlurmCluster]:
    """A two-node Slurm cluster for the whole session: partition `debug` (default), nodes node1 and node2 with
    4 CPUs and 2 fake GPUs each, KillWait=10, finished jobs visible to scontrol for 5 minutes."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])  # the daemons live in sbin
    missing = [tool for tool in TOOLS if shutil.which(tool, path=search) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} missing: {TOOLS_HINT}")
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root (SlurmUser=root)")
    with running_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster
