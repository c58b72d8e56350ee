"""`pai-launch env`'s pure parts: the text and JSON drawn from a fixed facts value, the probe's reading of a torch (a
fake one), the probe's result read from its exit code and output, and this machine's facts from fixed files."""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import subprocess
from types import SimpleNamespace

import pytest

from pai_launch.envreport import hostfacts, interpreter, probe, render
from pai_launch.linux import cgroups

pytestmark = pytest.mark.timeout(30)

GIB = 1024**3

#: One machine's facts as cli.envfacts gathers them: a GPU node inside a two-node Slurm job.
FACTS = {
    "format": 1,
    "pai_launch": {"version": "0.1.0", "python": "/venv/bin/python"},
    "python": {"executable": "/venv/bin/python", "version": "3.11.7", "implementation": "CPython"},
    "system": {"os": "Linux", "kernel": "6.8.0-45-generic", "machine": "x86_64",
               "distribution": "Ubuntu 22.04.4 LTS", "libc": "glibc 2.35"},
    "probe": {"python": "/venv/bin/python", "status": "ok", "detail": None, "seconds": 3.25},
    "packages": {"torch": "2.5.1", "torchvision": None, "perforatedai": "3.2.9"},
    "torch": {"version": "2.5.1", "file": "/venv/lib/torch/__init__.py", "cuda": "12.4", "cudnn": "9.1.0",
              "nccl": "2.21.5", "cuda_available": True, "gpus_error": None,
              "gpus": [{"index": 0, "name": "NVIDIA H100", "memory_bytes": 80 * GIB, "capability": "9.0"},
                       {"index": 1, "name": "NVIDIA H100", "memory_bytes": 80 * GIB, "capability": "9.0"}],
              "distributed": {"available": True, "nccl": True, "gloo": True}},
    "torch_error": None,
    "gpus": {"cuda_visible_devices": "0,1", "driver_count": 8, "driver_version": "550.54.15", "visible": ["0", "1"]},
    "cpu": {"usable_cores": 16, "machine_cores": 64, "cgroup_cpu_limit": 16.0, "memory_bytes": 512 * GIB,
            "cgroup_memory_limit_bytes": 128 * GIB},
    "open_files": {"soft": 1024, "hard": 1048576, "most_workers": 120},
    "placement": {"slurm": True, "slurm_job": {"job_id": "77", "nnodes": 2, "node_rank": 1, "hosts": ["gpu01", "gpu02"],
                                               "gpus_on_node": 2, "restart_count": 0},
                  "taken": ["--nnodes 2 (SLURM_STEP_NUM_NODES)", "--node-rank 1 (SLURM_NODEID)"],
                  "nnodes": "2", "node_rank": 1, "rendezvous": "gpu01:29477", "rdzv_id": "slurm-77", "problem": None},
    "options": {"nproc": 2, "nproc_from": "the visible GPUs", "save_name": "PAI", "save_folder": "/home/me/run/PAI",
                "gpus": None, "grace": 30.0, "max_failures": 3, "backoff": 1.0, "backoff_max": 60.0,
                "stall_timeout": None, "fs_settle": 30.0, "rdzv_timeout": 900.0, "log_format": "auto", "log_dir": None,
                "poll": False, "cold": False, "preload": None, "resume_from": None, "doctor": True,
                "metrics_port": None, "requeue_on": "SIGUSR1", "data_parallel": False},
    "environment": {"CUDA_VISIBLE_DEVICES": "0,1", "PAI_LAUNCH_GRACE": "30", "SLURM_JOB_ID": "77"},
}


def facts(**changes) -> dict:
    """FACTS with top-level keys replaced."""
    return {**copy.deepcopy(FACTS), **changes}


def lines_of(text: str) -> dict[str, str]:
    """The text's first line for each key."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and not line.startswith(" ") and key not in found:
            found[key] = value.strip()
    return found


# --- the text -------------------------------------------------------------------------------------
def test_the_text_names_every_version_and_where_the_interpreter_is():
    shown = lines_of(render.render_text(FACTS))
    assert shown["pai-launch"] == "0.1.0 (/venv/bin/python)"
    assert shown["python"] == "3.11.7 CPython (/venv/bin/python)"
    assert shown["os"] == "Linux 6.8.0-45-generic x86_64 (Ubuntu 22.04.4 LTS)"
    assert shown["libc"] == "glibc 2.35"
    assert shown["probe"] == "ok in 3.2 s (/venv/bin/python)"
    assert shown["torch"] == "2.5.1 (/venv/lib/torch/__init__.py)"
    assert (shown["torchvision"], shown["perforatedai"]) == ("not installed", "3.2.9")


def test_the_text_shows_cuda_the_gpus_and_the_limits():
    text = render.render_text(FACTS)
    shown = lines_of(text)
    assert shown["cuda"] == "available; built with CUDA 12.4, cuDNN 9.1.0, NCCL 2.21.5"
    assert shown["gpus (torch)"] == "0: NVIDIA H100, 80.0 GiB, compute 9.0"
    assert "1: NVIDIA H100, 80.0 GiB, compute 9.0" in text
    assert shown["distributed"] == "nccl yes, gloo yes"
    assert shown["nccl means"] == "ProcessGroupNCCL"
    assert (shown["CUDA_VISIBLE_DEVICES"], shown["gpus visible"]) == ("0,1", "0,1")
    assert shown["gpus (driver)"] == "8, driver 550.54.15"
    assert shown["cpu cores"] == "16 usable of 64; cgroup limit 16 core(s)"
    assert shown["memory"] == "512.0 GiB; cgroup limit 128.0 GiB"
    assert shown["open files"] == "1024 (hard 1048576): holds at most --nproc 120"


def test_the_text_shows_the_slurm_placement_and_the_options_a_launch_would_take():
    text = render.render_text(FACTS)
    shown = lines_of(text)
    assert shown["slurm"] == "job 77"
    assert shown["slurm job"].startswith("2 node(s) (gpu01,gpu02), this is node 1; GPUs on this node 2")
    assert shown["from slurm"] == "--nnodes 2 (SLURM_STEP_NUM_NODES)"
    assert shown["placement"] == "node 1 of 2, rendezvous store at gpu01:29477, rendezvous id slurm-77"
    assert shown["nproc"] == "2 (the visible GPUs)"
    assert shown["save name"] == "PAI (/home/me/run/PAI)"
    assert (shown["grace"], shown["fs settle"], shown["stall timeout"]) == ("30 s", "30 s", "off")
    assert shown["requeue on"] == "SIGUSR1"
    assert shown["environment"] == "CUDA_VISIBLE_DEVICES=0,1"


def test_values_line_up_in_one_column_and_further_lines_are_indented_to_it():
    text = render.render_text(FACTS)
    column = len("CUDA_VISIBLE_DEVICES: ")  # the longest key
    for line in text.splitlines():
        if line.startswith(" "):
            assert line[:column].strip() == "" and line[column] != " ", line
        else:
            key, _, _ = line.partition(":")
            assert line[len(key) + 1:column].strip() == "" and line[column] != " ", line
    assert "\n" + " " * column + "--node-rank 1 (SLURM_NODEID)\n" in text
    assert "\n" + " " * column + "SLURM_JOB_ID=77" in text


def test_a_failed_probe_leaves_torch_unknown_and_says_why():
    failed = facts(probe={"python": "/opt/py", "status": "failed", "detail": "exit code 1: boom", "seconds": 0.1},
                   python=None, packages=None, torch=None)
    shown = lines_of(render.render_text(failed))
    assert shown["probe"] == "failed after 0.1 s (/opt/py): exit code 1: boom"
    assert shown["python"] == "unknown: the probe of /opt/py failed"
    assert shown["torch"] == shown["perforatedai"] == "unknown (the probe failed)"
    assert "cuda" not in shown and "distributed" not in shown


def test_a_torch_that_cannot_be_imported_is_named_with_its_error():
    missing = facts(torch=None, torch_error="ModuleNotFoundError: No module named 'torch'",
                    packages={"torch": None, "torchvision": None, "perforatedai": None})
    assert lines_of(render.render_text(missing))["torch"] == \
        "not importable: ModuleNotFoundError: No module named 'torch'"
    broken = facts(torch=None, torch_error="OSError: libcudart.so.12: cannot open shared object file",
                   packages={"torch": "2.5.1", "torchvision": None, "perforatedai": None})
    assert lines_of(render.render_text(broken))["torch"].startswith("2.5.1 installed, not importable: OSError")


def test_a_cpu_machine_without_slurm_or_limits():
    plain = facts(torch={**FACTS["torch"], "cuda": None, "cudnn": None, "nccl": None, "cuda_available": False,
                         "gpus": [], "distributed": {"available": True, "nccl": False, "gloo": True}},
                  gpus={"cuda_visible_devices": None, "driver_count": 0, "driver_version": None, "visible": []},
                  cpu={**FACTS["cpu"], "cgroup_cpu_limit": None, "cgroup_memory_limit_bytes": None},
                  open_files={"soft": None, "hard": None, "most_workers": None},
                  placement={"slurm": False, "slurm_job": None, "taken": [], "nnodes": "1", "node_rank": 0,
                             "rendezvous": None, "rdzv_id": None, "problem": None},
                  environment={})
    shown = lines_of(render.render_text(plain))
    assert shown["cuda"] == "not available; torch built without CUDA"
    assert "gpus (torch)" not in shown
    assert shown["CUDA_VISIBLE_DEVICES"] == "unset"
    assert shown["gpus (driver)"] == "0 (no NVIDIA driver in /proc/driver/nvidia)"
    assert shown["gpus visible"] == "none"
    assert shown["cpu cores"].endswith("no cgroup limit") and shown["memory"].endswith("no cgroup limit")
    assert shown["open files"] == "unlimited"
    assert (shown["slurm"], shown["placement"]) == ("not detected (SLURM_JOB_ID is unset)", "one node")
    assert shown["environment"] == "none of the variables pai-launch reads"


def test_slurm_switched_off_and_a_launch_that_would_be_refused():
    refused = facts(placement={"slurm": False, "slurm_job": None, "taken": [], "nnodes": None, "node_rank": None,
                               "rendezvous": None, "rdzv_id": None, "problem": "--nproc 0 is less than 1: give ..."},
                    options=None)
    shown = lines_of(render.render_text(refused))
    assert shown["slurm"] == "not used (--no-slurm)"  # SLURM_JOB_ID is in the environment
    assert shown["launch"] == "refused: --nproc 0 is less than 1: give ..."
    assert "placement" not in shown and "nproc" not in shown and "grace" not in shown


def test_the_json_is_the_facts_with_sorted_keys():
    text = render.render_json(FACTS)
    assert json.loads(text) == FACTS
    assert text == json.dumps(FACTS, indent=2, sort_keys=True)


# --- the probe, on a fake torch -------------------------------------------------------------------
def fake_torch(*, cuda: str | None = "12.4", available: bool = True, count: int = 1, nccl=(2, 21, 5),
               distributed: bool = True, props_error: Exception | None = None):
    def props(index):
        if props_error:
            raise props_error
        return SimpleNamespace(name=f"GPU{index}", total_memory=16 * GIB, major=8, minor=6)

    def nccl_version():
        if nccl is None:
            raise AttributeError("module 'torch._C' has no attribute '_nccl_version'")
        return nccl

    return SimpleNamespace(
        __version__="2.5.1", __file__="/site/torch/__init__.py", version=SimpleNamespace(cuda=cuda),
        backends=SimpleNamespace(cudnn=SimpleNamespace(version=lambda: 90100 if cuda else None)),
        cuda=SimpleNamespace(is_available=lambda: available, device_count=lambda: count,
                             get_device_properties=props, nccl=SimpleNamespace(version=nccl_version)),
        distributed=SimpleNamespace(is_available=lambda: distributed, is_nccl_available=lambda: cuda is not None,
                                    is_gloo_available=lambda: True),
    )


def test_the_probe_reads_a_cuda_torch():
    found = probe.torch_facts(fake_torch(count=2))
    assert (found["version"], found["file"]) == ("2.5.1", "/site/torch/__init__.py")
    assert (found["cuda"], found["cudnn"], found["nccl"], found["cuda_available"]) == ("12.4", "9.1.0", "2.21.5", True)
    assert found["gpus"] == [{"index": i, "name": f"GPU{i}", "memory_bytes": 16 * GIB, "capability": "8.6"}
                             for i in (0, 1)]
    assert found["distributed"] == {"available": True, "nccl": True, "gloo": True}
    json.dumps(found)  # what the probe prints


def test_the_probe_reads_a_cpu_build_without_asking_for_nccl():
    found = probe.torch_facts(fake_torch(cuda=None, available=False, nccl=None))
    assert (found["cuda"], found["cudnn"], found["nccl"], found["cuda_available"], found["gpus"]) == \
        (None, None, None, False, [])
    assert found["distributed"] == {"available": True, "nccl": False, "gloo": True}


def test_a_gpu_the_driver_fails_on_is_an_error_not_a_crash():
    found = probe.torch_facts(fake_torch(props_error=RuntimeError("CUDA error: no CUDA-capable device\nmore")))
    assert found["gpus"] == [] and found["gpus_error"] == "RuntimeError: CUDA error: no CUDA-capable device"


def test_without_torch_distributed_only_that_is_said():
    assert probe.torch_facts(fake_torch(distributed=False))["distributed"] == {"available": False}


@pytest.mark.parametrize("number, text", [(90100, "9.1.0"), (8902, "8.9.2"), (90501, "9.5.1"), (None, None), (0, None)])
def test_cudnn_numbers_read_as_versions(number, text):
    assert probe.cudnn_text(number) == text


def test_package_versions_say_none_for_what_is_not_installed():
    def version(name):
        if name == "torchvision":
            raise importlib.metadata.PackageNotFoundError(name)
        return {"torch": "2.5.1", "perforatedai": "3.2.9"}[name]

    assert probe.package_versions(version) == {"torch": "2.5.1", "torchvision": None, "perforatedai": "3.2.9"}


def test_the_probe_imports_nothing_of_pai_launch():
    """It runs as `python -c` in an interpreter that may not have pai-launch installed."""
    source = interpreter.PROBE.read_text()
    assert "pai_launch" not in source.split('"""', 2)[2]


# --- the probe's result ---------------------------------------------------------------------------
def test_a_probe_that_printed_its_json_is_ok_whatever_came_before():
    found = interpreter.parse(0, 'a warning torch printed\n{"torch": null}\n', "")
    assert found == {"status": "ok", "detail": None, "facts": {"torch": None}}


@pytest.mark.parametrize("returncode, stdout, stderr, detail", [
    (1, "", "Traceback\n  File x\nImportError: boom\n", "exit code 1: Traceback | File x | ImportError: boom"),
    (1, "", "", "exit code 1"),
    (-9, "", "", "killed by signal 9"),
    (0, "not json\n", "", "exit code 0 but no JSON on stdout"),
    (0, "[1, 2]\n", "", "exit code 0 but no JSON on stdout"),
])
def test_a_probe_that_failed_says_how(returncode, stdout, stderr, detail):
    assert interpreter.parse(returncode, stdout, stderr) == {"status": "failed", "detail": detail, "facts": None}


def test_a_probe_that_times_out_or_cannot_start_is_reported_not_raised():
    ticks = iter([10.0, 12.5])

    def slow(argv, **kwargs):
        assert argv[:2] == ["/py", "-c"] and kwargs["timeout"] == 2.5
        raise subprocess.TimeoutExpired(argv, 2.5)

    timed_out = interpreter.probe("/py", 2.5, run=slow, clock=lambda: next(ticks))
    assert (timed_out["status"], timed_out["seconds"], timed_out["facts"]) == ("timed out", 2.5, None)
    assert "--timeout" in timed_out["detail"]

    def unrunnable(argv, **kwargs):
        raise PermissionError(13, "Permission denied")

    failed = interpreter.probe("/py", 5, run=unrunnable, clock=lambda: 0.0)
    assert (failed["status"], failed["detail"]) == ("failed", "cannot run it: Permission denied")


def test_a_probe_that_answers_is_ok_with_its_facts():
    def answers(argv, **kwargs):
        assert argv[2] == interpreter.PROBE.read_text()
        return subprocess.CompletedProcess(argv, 0, '{"python": {"version": "3.11.7"}}\n', "")

    done = interpreter.probe("/py", 5, run=answers, clock=lambda: 0.0)
    assert (done["status"], done["facts"]) == ("ok", {"python": {"version": "3.11.7"}})


def test_an_interpreter_is_found_by_path_or_on_path_and_refused_otherwise(tmp_path, monkeypatch):
    python = tmp_path / "python9"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert interpreter.resolve(str(python)) == str(python)
    assert interpreter.resolve("python9") == str(python)
    for bad, says in [(str(tmp_path / "nope"), "no such file"), ("nope", "no such file"),
                      (str(tmp_path), "is not an executable file")]:
        with pytest.raises(interpreter.NoInterpreter) as refused:
            interpreter.resolve(bad)
        assert str(refused.value).startswith(f"--python {bad}") and says in str(refused.value)
        assert "\n" not in str(refused.value)
    python.chmod(0o644)
    with pytest.raises(interpreter.NoInterpreter, match="not an executable file"):
        interpreter.resolve(str(python))


# --- this machine, from fixed files ---------------------------------------------------------------
def test_the_distribution_and_driver_come_from_their_files():
    assert hostfacts.distribution('NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n') == "Ubuntu 22.04.4 LTS"
    assert hostfacts.distribution("NAME=Alpine\n") is None
    line = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version: 12"
    assert hostfacts.driver_version(line) == "550.54.15"
    assert hostfacts.driver_version("") is None


def test_system_reads_its_files_through_the_reader_given():
    def read(path):
        if path == hostfacts.OS_RELEASE:
            return 'PRETTY_NAME="Test OS 1"\n'
        raise FileNotFoundError(path)

    found = hostfacts.system(read)
    assert found["distribution"] == "Test OS 1" and found["os"] == os.uname().sysname
    assert hostfacts.gpu_driver(read) is None


def test_memory_cores_and_limits():
    found = hostfacts.cpu(cores=lambda: 4, count=lambda: 64, limits=lambda: cgroups.Limits(2.5, 8 * GIB),
                          read=lambda path: "MemTotal:       16384 kB\nMemFree: 1 kB\n")
    assert found == {"usable_cores": 4, "machine_cores": 64, "cgroup_cpu_limit": 2.5, "memory_bytes": 16 * 1024**2,
                     "cgroup_memory_limit_bytes": 8 * GIB}


@pytest.mark.parametrize("limits, expected", [
    ((1024, 4096), {"soft": 1024, "hard": 4096, "most_workers": 120}),
    ((32, 4096), {"soft": 32, "hard": 4096, "most_workers": 0}),
    ((hostfacts.resource.RLIM_INFINITY,) * 2, {"soft": None, "hard": None, "most_workers": None}),
])
def test_the_open_files_limit_and_the_workers_it_holds(limits, expected):
    assert hostfacts.open_files(limits=lambda: limits) == expected


def test_only_the_variables_that_change_a_run_are_shown_sorted():
    env = {"PAI_LAUNCH_NPROC": "2", "SLURM_NODEID": "1", "SLURM_CPUS_ON_NODE": "8", "NCCL_DEBUG": "INFO",
           "CUDA_VISIBLE_DEVICES": "0", "HOME": "/home/me", "TORCH_CPP_LOG_LEVEL": "INFO", "PATH": "/bin"}
    assert list(hostfacts.variables(env, ("SLURM_NODEID",))) == [
        "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "PAI_LAUNCH_NPROC", "SLURM_NODEID", "TORCH_CPP_LOG_LEVEL"]


# --- control groups -------------------------------------------------------------------------------
@pytest.mark.parametrize("text, cores", [("200000 100000", 2.0), ("50000 100000", 0.5), ("max 100000", None),
                                         ("", None)])
def test_cgroup_v2_cpu_max(text, cores):
    assert cgroups.cpu_max(text) == cores


def test_cgroup_values_that_mean_no_limit():
    assert cgroups.cpu_quota("-1", "100000") is None and cgroups.cpu_quota("150000", "100000") == 1.5
    assert cgroups.memory_bytes("max\n") is None and cgroups.memory_bytes("9223372036854771712\n") is None
    assert cgroups.memory_bytes("1073741824\n") == GIB


def test_the_groups_of_this_process():
    text = "12:cpu,cpuacct:/slurm/job_7\n4:memory:/slurm/job_7\n0::/user.slice\n"
    assert cgroups.groups(text) == {"cpu": "/slurm/job_7", "cpuacct": "/slurm/job_7", "memory": "/slurm/job_7",
                                    "": "/user.slice"}


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_limits_are_the_smallest_on_the_way_to_the_root(tmp_path):
    root = tmp_path / "cgroup"
    _write(root / "cgroup.controllers", "cpu memory\n")
    _write(root / "job" / "cpu.max", "400000 100000\n")
    _write(root / "job" / "memory.max", str(2 * GIB))
    _write(root / "job" / "step" / "cpu.max", "max 100000\n")
    _write(root / "job" / "step" / "memory.max", "max\n")
    self_cgroup = tmp_path / "self"
    self_cgroup.write_text("0::/job/step\n")
    assert cgroups.limits(root, self_cgroup) == cgroups.Limits(4.0, 2 * GIB)


def test_cgroup_v1_limits_and_a_container_whose_path_is_the_hosts(tmp_path):
    root = tmp_path / "cgroup"
    _write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    _write(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    _write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "150000\n")
    _write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    _write(root / "memory" / "memory.limit_in_bytes", str(GIB))
    self_cgroup = tmp_path / "self"
    self_cgroup.write_text("3:cpu,cpuacct:/docker/abc\n2:memory:/host/only/path\n")
    assert cgroups.limits(root, self_cgroup) == cgroups.Limits(1.5, GIB)


def test_no_control_groups_means_no_limits(tmp_path):
    assert cgroups.limits(tmp_path / "none", tmp_path / "missing") == cgroups.Limits(None, None)


def test_on_torch_2_15_the_report_says_nccl_is_nccl2_and_how_to_roll_back():
    facts = {**FACTS, "torch": {**FACTS["torch"], "version": "2.15.0+cu132"}}
    assert lines_of(render.render_text(facts))["nccl means"].startswith("ProcessGroupNCCL2 (this torch's default; "
                                                                         "TORCH_DIST_USE_NCCL2=0")
    rolled_back = {**facts, "torch": {**facts["torch"], "use_nccl2": "0"}}
    assert lines_of(render.render_text(rolled_back))["nccl means"].startswith("ProcessGroupNCCL "
                                                                              "(TORCH_DIST_USE_NCCL2=0")
