"""The test cluster itself: a two-node batch job runs one task on each node; a second cluster (another test session
on the same host) starts beside the first on ports of its own and runs its jobs too."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.slurm.conftest import running_cluster

BATCH_SCRIPT = """\
#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=1
#SBATCH --output=slurm-%j.out
# One line per task: its node id and the job's node list.
srun bash -c 'echo "$SLURM_NODEID $SLURM_JOB_NODELIST"' >"$1"
"""


@pytest.mark.timeout(120)
def test_two_node_job_runs_one_task_on_each_node(slurm_cluster, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(BATCH_SCRIPT)
    tasks = tmp_path / "tasks.txt"

    job_id = slurm_cluster.sbatch(script, str(tasks), cwd=tmp_path)
    slurm_cluster.wait_state(job_id, "COMPLETED", timeout=60)

    lines = [line.split() for line in tasks.read_text().splitlines()]
    assert {node_id for node_id, _ in lines} == {"0", "1"}
    assert len(lines) == 2
    assert {nodelist for _, nodelist in lines} == {"node[1-2]"}


def _ports(conf) -> set[str]:
    return set(re.findall(r"Port=(\d+)", conf.read_text()))


@pytest.mark.timeout(180)
def test_a_second_cluster_starts_beside_the_first_on_ports_of_its_own_and_runs_a_job(slurm_cluster, tmp_path):
    folder = tmp_path / "second"
    folder.mkdir()
    with running_cluster(folder) as second:
        conf = folder / "slurm.conf"
        assert _ports(conf) and not _ports(conf) & _ports(slurm_cluster.dir / "slurm.conf")
        ran = subprocess.run(["srun", "-N2", "-n2", "bash", "-c", "echo $SLURMD_NODENAME"], env=second.env,
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert ran.returncode == 0 and sorted(ran.stdout.split()) == ["node1", "node2"], ran.stderr
    job_id = slurm_cluster.sbatch(_one_task(tmp_path), cwd=tmp_path)  # the first cluster still runs jobs
    assert slurm_cluster.wait_state(job_id, "COMPLETED", timeout=60) == "COMPLETED"


def _one_task(tmp_path):
    script = tmp_path / "one.sh"
    script.write_text("#!/bin/bash\n#SBATCH -N 1\n#SBATCH --output=one-%j.out\ntrue\n")
    return script
