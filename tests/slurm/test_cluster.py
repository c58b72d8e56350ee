"""The test cluster itself: a two-node batch job runs one task on each node."""

from __future__ import annotations

import pytest

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
