"""`pai-launch env`'s facts gathered with every reader replaced: the launch's own view of the options, GPUs and Slurm
placement; a value a launch would refuse becomes the report's `problem`, never an exception."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pai_launch.cli import envfacts
from pai_launch.cli.specbuilder import Host
from pai_launch.envreport import render
from pai_launch.placement import slurm
from tests.helpers import docs_page

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
STEP = {"SLURM_JOB_ID": "77", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_NODEID": "1",
        "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_GPUS_ON_NODE": "2"}
PROBED = {"python": {"executable": "/py", "version": "3.11.7", "implementation": "CPython"},
          "packages": {"torch": "2.5.1", "torchvision": None, "perforatedai": "3.2.9"},
          "torch": {"version": "2.5.1", "file": "/site/torch/__init__.py", "cuda": None, "cudnn": None, "nccl": None,
                    "cuda_available": False, "gpus": [], "gpus_error": None,
                    "distributed": {"available": True, "nccl": False, "gloo": True}},
          "torch_error": None}


def readers(env=None, physical=0, probed=PROBED, monkeypatch=None) -> envfacts.Readers:
    """Fixed readers; the options come from `env` as a launch would read them (click reads os.environ)."""
    env = dict(env or {})
    if monkeypatch is not None:
        for name, value in env.items():
            if name.startswith("PAI_LAUNCH_"):
                monkeypatch.setenv(name, value)
    return envfacts.Readers(
        where=lambda: Host(env=env, physical_gpus=physical, workdir=Path("/home/me/run"), python="/venv/bin/python"),
        probe=lambda python, timeout: {"python": python, "status": "ok", "detail": None, "seconds": 1.0,
                                       "facts": probed},
        system=lambda: {"os": "Linux", "kernel": "6.8.0", "machine": "x86_64", "distribution": None, "libc": None},
        cpu=lambda: {"usable_cores": 2, "machine_cores": 2, "cgroup_cpu_limit": None, "memory_bytes": None,
                     "cgroup_memory_limit_bytes": None},
        open_files=lambda: {"soft": 1024, "hard": 4096, "most_workers": 120},
        gpu_driver=lambda: None,
    )


@pytest.fixture(autouse=True)
def no_inherited_options(monkeypatch):
    for name in list(os.environ):
        if name.startswith("PAI_LAUNCH_"):
            monkeypatch.delenv(name)


def test_nothing_set_gives_one_node_and_the_declared_defaults():
    facts = envfacts.gather("/py", 9.0, readers())
    assert facts["format"] == envfacts.JSON_FORMAT
    assert facts["placement"] == {"slurm": False, "slurm_job": None, "taken": [], "nnodes": "1", "node_rank": 0,
                                  "rendezvous": None, "rdzv_id": None, "problem": None}
    options = facts["options"]
    assert (options["nproc"], options["nproc_from"]) == (1, "no GPU visible")
    assert (options["save_name"], options["save_folder"]) == ("PAI", "/home/me/run/PAI")
    assert (options["grace"], options["max_failures"], options["fs_settle"], options["stall_timeout"]) == \
        (30.0, 3, 0.0, None)
    assert facts["environment"] == {}


def test_the_probe_is_asked_of_the_interpreter_given_and_its_facts_are_spread():
    asked = []

    def probe(python, timeout):
        asked.append((python, timeout))
        return {"python": python, "status": "ok", "detail": None, "seconds": 1.0, "facts": PROBED}

    facts = envfacts.gather("/opt/other/python", 7.5, replace(readers(), probe=probe))
    assert asked == [("/opt/other/python", 7.5)]
    assert facts["probe"] == {"python": "/opt/other/python", "status": "ok", "detail": None, "seconds": 1.0}
    assert (facts["torch"], facts["packages"], facts["python"]) == (PROBED["torch"], PROBED["packages"],
                                                                   PROBED["python"])
    assert facts["pai_launch"]["python"] == "/venv/bin/python"


def test_a_failed_probe_leaves_its_facts_empty():
    def probe(python, timeout):
        return {"python": python, "status": "timed out", "detail": "no answer", "seconds": 1.0, "facts": None}

    facts = envfacts.gather("/py", 1.0, replace(readers(), probe=probe))
    assert (facts["torch"], facts["packages"], facts["python"], facts["torch_error"]) == (None, None, None, None)
    assert facts["probe"]["status"] == "timed out"
    render.render_text(facts)  # renders without the probe's facts


def test_the_gpus_are_counted_as_the_preflight_counts_them():
    facts = envfacts.gather("/py", 1.0, readers({"CUDA_VISIBLE_DEVICES": "2,3,-1,4"}, physical=8))
    assert facts["gpus"] == {"cuda_visible_devices": "2,3,-1,4", "driver_count": 8, "driver_version": None,
                             "visible": ["2", "3"]}
    assert (facts["options"]["nproc"], facts["options"]["nproc_from"]) == (2, "the visible GPUs")
    every = envfacts.gather("/py", 1.0, readers(physical=4))
    assert every["gpus"]["visible"] == ["0", "1", "2", "3"] and every["options"]["nproc"] == 4


def test_a_slurm_step_is_placed_as_a_launch_places_it():
    facts = envfacts.gather("/py", 1.0, readers(STEP))
    place = facts["placement"]
    assert place["slurm"] is True and place["problem"] is None
    assert place["slurm_job"] == {"job_id": "77", "nnodes": 2, "node_rank": 1, "hosts": ["gpu01", "gpu02"],
                                  "gpus_on_node": 2, "restart_count": 0}
    assert (place["nnodes"], place["node_rank"], place["rendezvous"], place["rdzv_id"]) == \
        ("2", 1, "gpu01:29477", "slurm-77")
    assert "--rdzv-endpoint gpu01:29477 (first host of SLURM_JOB_NODELIST, port from the job id)" in place["taken"]
    assert (facts["options"]["nproc"], facts["options"]["nproc_from"]) == (2, "SLURM_GPUS_ON_NODE")
    assert facts["options"]["fs_settle"] == 30.0  # several nodes share the save folder
    assert facts["environment"] == STEP


def test_options_from_the_environment_win_as_in_a_launch(monkeypatch):
    env = {**STEP, "PAI_LAUNCH_NPROC": "1", "PAI_LAUNCH_NODE_RANK": "0", "PAI_LAUNCH_GRACE": "5",
           "PAI_LAUNCH_REQUEUE_ON": "usr1"}
    facts = envfacts.gather("/py", 1.0, readers(env, monkeypatch=monkeypatch))
    assert (facts["options"]["nproc"], facts["options"]["nproc_from"]) == (1, "PAI_LAUNCH_NPROC")
    assert (facts["options"]["grace"], facts["options"]["requeue_on"]) == (5.0, "SIGUSR1")
    assert facts["placement"]["node_rank"] == 0
    assert not any(line.startswith(("--nproc", "--node-rank")) for line in facts["placement"]["taken"])
    assert facts["environment"]["PAI_LAUNCH_GRACE"] == "5"


def test_slurm_switched_off_is_not_used(monkeypatch):
    facts = envfacts.gather("/py", 1.0, readers({**STEP, "PAI_LAUNCH_SLURM": "0"}, monkeypatch=monkeypatch))
    assert (facts["placement"]["slurm"], facts["placement"]["taken"], facts["placement"]["nnodes"]) == (False, [], "1")


@pytest.mark.parametrize("env, problem", [
    ({"PAI_LAUNCH_NPROC": "abc"}, "PAI_LAUNCH_NPROC"),
    ({"PAI_LAUNCH_NPROC": "0"}, "--nproc 0 is less than 1"),
    ({"PAI_LAUNCH_GRACE": "nan"}, "--grace nan"),
    ({k: v for k, v in STEP.items() if k != "SLURM_STEP_ID"}, "not running under srun"),
    ({**STEP, "SLURM_JOB_NODELIST": "gpu[01-"}, "SLURM_JOB_NODELIST 'gpu[01-' cannot be parsed"),
])
def test_what_a_launch_would_refuse_is_reported_as_its_one_line(monkeypatch, env, problem):
    facts = envfacts.gather("/py", 1.0, readers(env, monkeypatch=monkeypatch))
    assert problem in facts["placement"]["problem"] and "\n" not in facts["placement"]["problem"]
    assert facts["options"] is None
    assert facts["placement"]["slurm"] is ("SLURM_JOB_ID" in env)
    assert "refused: " in render.render_text(facts)


def test_the_slurm_job_is_still_shown_when_only_the_launch_is_refused(monkeypatch):
    facts = envfacts.gather("/py", 1.0, readers({**STEP, "PAI_LAUNCH_NPROC": "0"}, monkeypatch=monkeypatch))
    assert facts["placement"]["slurm_job"]["hosts"] == ["gpu01", "gpu02"]


def test_the_command_line_is_the_launch_commands_own(monkeypatch):
    monkeypatch.setenv("PAI_LAUNCH_SAVE_NAME", "runs/a")
    monkeypatch.setenv("PAI_LAUNCH_POLL", "1")
    typed = envfacts.command_line()
    assert (typed.save_name, typed.poll, typed.nproc, typed.grace) == ("runs/a", True, None, 30.0)


def test_every_slurm_variable_a_launch_reads_is_shown():
    """A new SLURM_* read in the placement's code must be listed in slurm.READ_VARIABLES, or the report misses it."""
    read = set()
    for module in ("placement/slurm.py", "placement/joboptions.py", "cli/specbuilder.py"):
        tree = ast.parse((ROOT / "supervisor" / "pai_launch" / module).read_text())
        read |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                 and isinstance(node.value, str) and re.fullmatch(r"SLURM_[A-Z_]+", node.value)}
    assert read and read <= set(slurm.READ_VARIABLES), read - set(slurm.READ_VARIABLES)


def test_every_top_level_json_key_is_documented_in_the_env_page():
    facts = envfacts.gather("/py", 1.0, readers(STEP))
    section = docs_page("users/env.md")
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M))
    assert documented == set(facts), set(facts) ^ documented
