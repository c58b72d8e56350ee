"""scripts/gpu_check.py's reading of nvidia-smi, its roles and its table, on scripted runs (the check itself needs a
GPU; here its verdicts are shown to fail when they should)."""

import pytest

from scripts import gpu_check
from scripts.gpu_check import Run


def test_compute_apps_are_read_from_nvidia_smis_csv():
    text = "1234, 512\n5678, [N/A]\n\nnot a row\n"
    assert gpu_check.compute_apps(text) == {1234: 512, 5678: 0}


@pytest.mark.parametrize("cmdline, parent, role", [
    ("python -c import sys; ... pai_launch.agent.main --cold", "python -m pai_launch", "agent"),
    ("python -c from multiprocessing.forkserver import main; main(3)", "python -c pai_launch.agent.main", "forkserver"),
    ("python -c from multiprocessing.forkserver import main; main(3)",
     "python -c from multiprocessing.forkserver import main; main(3)", "worker"),
    ("python -u /x/examples/train_pai_ddp.py --max-dendrites 10", "python -c pai_launch.agent.main", "worker"),
    ("python -m pai_launch --nproc 1 train_pai_ddp.py", "bash", "pai-launch"),
    ("/venv/bin/pai-launch --nproc 1 train_pai_ddp.py", "bash", "pai-launch"),
])
def test_each_process_gets_its_role(cmdline, parent, role):
    assert gpu_check.role_of(cmdline, parent) == role


def test_restart_gaps_run_from_the_switch_to_the_next_step():
    progress = [{"event": "switched", "t": 10.0, "rank": 0}, {"event": "first_step", "t": 12.5, "rank": 0},
                {"event": "switched", "t": 20.0, "rank": 1}, {"event": "first_step", "t": 21.0, "rank": 1},
                {"event": "first_step", "t": 30.0, "rank": 0}]
    assert gpu_check.restart_gaps(progress) == [2.5]


def _runs(agent_mib=None, in_process_after=(100, 100)):
    def run(mode, gap, generations):
        progress = []
        for n in range(gpu_check.DENDRITES):
            progress += [{"event": "switched", "t": 10.0 * n, "rank": 0},
                         {"event": "first_step", "t": 10.0 * n + gap, "rank": 0, "backend": "nccl"}]
        events = [{"event": "generation_started"} for _ in range(generations)]
        return Run(mode, 0, events, progress, {"worker": 900})
    runs = {"warm": run("warm", 2.0, 11), "cold": run("cold", 6.0, 11), "in-process": run("in-process", 0.1, 1)}
    if agent_mib is not None:
        runs["warm"].gpu_mib["agent"] = agent_mib
    after = list(in_process_after) * (gpu_check.DENDRITES // 2)
    runs["in-process"].events += [{"event": "restructured_in_process", "memory_before": 2**20 * a, "memory_after": 2**20 * a}
                                  for a in after]
    return runs


def test_a_good_run_passes_every_line():
    rows = gpu_check.table(_runs())
    assert all(passed for _, _, passed in rows), rows


def test_an_agent_holding_gpu_memory_fails_its_line():
    rows = dict((check, passed) for check, _, passed in gpu_check.table(_runs(agent_mib=300)))
    assert rows["agent and forkserver: GPU memory, CUDA context"] is False


def test_memory_that_grows_across_restructures_fails_its_line():
    rows = dict((check, passed) for check, _, passed in gpu_check.table(_runs(in_process_after=(100, 400))))
    assert rows["GPU memory across 10 in-process restructures, MiB"] is False
