"""scripts/gpu_check.py's reading of nvidia-smi, its roles and its table, on scripted runs (the check itself needs a
GPU; here its verdicts are shown to fail when they should)."""

import pytest

pytestmark = pytest.mark.timeout(30)

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


def _runs(agent_mib=None, in_process_after=(100, 100), nccl_class="ProcessGroupNCCL", legacy_class="ProcessGroupNCCL",
          warm_cuda=True, apps_seen=3):
    def run(mode, gap, generations, cls=nccl_class, cuda=True):
        progress = []
        for n in range(gpu_check.RUN_DENDRITES[mode]):
            progress += [{"event": "switched", "t": 10.0 * n, "rank": 0},
                         {"event": "first_step", "t": 10.0 * n + gap, "rank": 0, "backend": "nccl",
                          "nccl_class": cls}]
        for pid in range(generations):
            progress.append({"event": "process_start", "t": 100.0 * pid, "rank": 0, "pid": pid})
            if cuda:
                progress.append({"event": "cuda_ready", "t": 100.0 * pid + 1.5, "rank": 0, "pid": pid})
        events = [{"event": "generation_started"} for _ in range(generations)]
        return Run(mode, 0, events, progress, {"worker": 900}, apps_seen=apps_seen)
    runs = {"warm": run("warm", 2.0, 11, cuda=warm_cuda), "cold": run("cold", 6.0, 5),
            "in-process": run("in-process", 0.1, 1), "legacy-nccl": run("legacy-nccl", 2.0, 4, cls=legacy_class)}
    if agent_mib is not None:
        runs["warm"].gpu_mib["agent"] = agent_mib
    after = list(in_process_after) * (gpu_check.DENDRITES // 2)
    runs["in-process"].events += [{"event": "restructured_in_process", "memory_before": 2**20 * a,
                                   "memory_after": 2**20 * a}
                                  for a in after]
    return runs


def _verdicts(runs, torch_version="2.11.0+cu130"):
    return {check: passed for check, _, passed in gpu_check.table(runs, torch_version)}


def test_a_good_run_passes_every_line_and_nccl2_is_na_before_2_15():
    verdicts = _verdicts(_runs())
    assert verdicts.pop("`nccl` is NCCL2 by default (torch 2.15 and later)") is None
    assert all(verdicts.values()), verdicts


def test_on_2_15_nccl_must_be_nccl2_by_default():
    assert _verdicts(_runs(nccl_class="ProcessGroupNCCL2"), "2.15.0+cu132")[
        "`nccl` is NCCL2 by default (torch 2.15 and later)"] is True
    assert _verdicts(_runs(), "2.15.0+cu132")["`nccl` is NCCL2 by default (torch 2.15 and later)"] is False


def test_the_rollback_must_give_the_older_nccl():
    rows = _verdicts(_runs(nccl_class="ProcessGroupNCCL2", legacy_class="ProcessGroupNCCL2"), "2.15.0")
    assert rows["TORCH_DIST_USE_NCCL2=0: the older NCCL, trained through"] is False


def test_where_nvidia_smi_sees_no_process_the_context_check_says_na_not_pass():
    runs = _runs(apps_seen=0)
    runs["warm"].gpu_mib.clear()
    runs["warm"].device_files["worker"] = {"/dev/nvidia0", "/dev/nvidiactl"}
    rows = {check: (seen, passed) for check, seen, passed in gpu_check.table(runs, "2.11.0")}
    seen, passed = rows["agent and forkserver: GPU memory, CUDA context"]
    assert passed is None and "n/a" in seen and "worker /dev/nvidia0 /dev/nvidiactl" in seen
    assert rows["warm workers are not bad forks"][1] is True  # the workers' own CUDA calls say so


def test_a_warm_worker_that_never_reached_cuda_fails_its_line():
    assert _verdicts(_runs(warm_cuda=False))["a worker's start -> its first CUDA call, s: warm / cold"] is False


def test_first_cuda_calls_pair_each_process_with_its_start():
    progress = [{"event": "process_start", "t": 1.0, "pid": 7}, {"event": "cuda_ready", "t": 3.5, "pid": 7},
                {"event": "cuda_ready", "t": 9.0, "pid": 8}]
    assert gpu_check.first_cuda_calls(progress) == [2.5]


@pytest.mark.parametrize("version, release", [("2.15.0+cu132", (2, 15)), ("2.4.1", (2, 4)), ("2.16.0a0+git", (2, 16))])
def test_torch_release(version, release):
    assert gpu_check.torch_release(version) == release


def test_an_agent_holding_gpu_memory_fails_its_line():
    rows = _verdicts(_runs(agent_mib=300))
    assert rows["agent and forkserver: GPU memory, CUDA context"] is False


def test_memory_that_grows_across_restructures_fails_its_line():
    rows = _verdicts(_runs(in_process_after=(100, 400)))
    assert rows["GPU memory across 10 in-process restructures, MiB"] is False
