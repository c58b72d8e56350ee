"""The agent's self-check: a forkserver is used only when a fork of it shows CUDA untouched and no thread of its own.

A preload module that makes the server look CUDA-initialised, or that starts a thread, is dropped (the agent tries
again with the safe preload, torch and torch.distributed) or, when nothing safe is left, every worker runs cold; the
log says why. Also: --preload and --cold are checked before anything starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.proc.test_warm_workers import PROBE

pytestmark = pytest.mark.timeout(120)

HOOKS = Path(__file__).with_name("preload_hooks")


def _run(scene, *pai_args: str):
    env = {"PYTHONPATH": os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return scene.run("--nproc", "2", *pai_args, script=PROBE, instrument=False, env=env,
                     script_args=["--out", str(scene.io / "out"), "--generations", "2"], timeout=90)


@pytest.mark.parametrize(("hook", "why"), [("fake_cuda_init", "CUDA was initialised in the forkserver"),
                                           ("starts_thread", "thread(s) after its preload")])
def test_an_unsafe_preload_module_is_dropped_and_the_safe_preload_kept(scene, hook, why):
    launch, rc = _run(scene, "--preload", f"torch,torch.distributed,{hook}")

    assert rc == 0, launch.log_summary()
    ready = launch.event("agent_ready")
    assert ready["workers"] == "warm" and ready["preloaded"] == "torch,torch.distributed", ready
    assert why in ready["fell_back"] and hook in ready["fell_back"] and ready["not_preloaded"] == hook


def test_with_nothing_safe_to_preload_every_worker_runs_cold_and_the_log_says_why(scene):
    launch, rc = _run(scene, "--preload", "fake_cuda_init")

    assert rc == 0, launch.log_summary()
    assert not launch.events("agent_ready")
    refused = launch.event("warm_workers_refused")
    assert refused["workers"] == "cold" and "CUDA was initialised in the forkserver" in refused["reason"]
    records = sorted((scene.io / "out").glob("[12]-*.json"))
    assert len(records) == 4 and all('"preloaded": []' in path.read_text() for path in records)


def test_an_empty_preload_still_forks_warm_workers(scene):
    launch, rc = _run(scene, "--preload", "")

    assert rc == 0, launch.log_summary()
    ready = launch.event("agent_ready")
    assert ready["workers"] == "warm" and ready["preloaded"] == ""


@pytest.mark.parametrize(("args", "words"), [
    (("--preload", "no_such_module_here"), "no module no_such_module_here"),
    (("--preload", "torch;rm"), "is not a module name"),
    (("--cold", "--preload", "torch"), "--preload has no effect with --cold"),
])
def test_bad_warm_options_are_refused_before_anything_starts(scene, args, words):
    launch, rc = _run(scene, *args)

    assert rc == 2
    assert words in launch.stderr and len(launch.stderr.strip().splitlines()) == 1, launch.stderr
    assert not (scene.work / "PAI").exists() and not (scene.io / "out").exists()


NVML_CHECK = r'''
import json, sys, torch, torch.cuda
calls = []
# What a CUDA build on a one-GPU machine looks like to torch.cuda, with the CUDA runtime's entry points recorded.
torch.cuda._is_compiled = lambda: True
torch.cuda._device_count_nvml = lambda: 1
torch._C._cuda_getDeviceCount = lambda: calls.append("cudaGetDeviceCount") or 1
torch.cuda._lazy_init = lambda: calls.append("lazy_init")
torch._C._cuda_init = lambda: calls.append("cuda_init")
from perforatedai import utils_perforatedai  # what the forkserver preloads: it imports the rest
print(json.dumps({"calls": calls}))
'''


@pytest.mark.parametrize("nvml", [True, False])
def test_importing_perforatedai_under_the_nvml_check_calls_no_cuda_runtime(nvml):
    """Why perforatedai may be preloaded: its import asks torch.cuda.is_available(), which on a CUDA build calls the
    CUDA runtime (and poisons every later fork) unless PYTORCH_NVML_BASED_CUDA_CHECK=1 makes it ask NVML instead.
    The control run (without the setting) shows the check can fail."""
    env = {key: value for key, value in os.environ.items() if key != "PYTORCH_NVML_BASED_CUDA_CHECK"}
    if nvml:
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    done = subprocess.run([sys.executable, "-c", NVML_CHECK], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = __import__("json").loads(done.stdout.strip().splitlines()[-1])["calls"]
    if nvml:
        assert calls == []
    else:
        assert "cudaGetDeviceCount" in calls
