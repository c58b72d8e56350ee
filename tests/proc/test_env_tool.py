"""`pai-launch env` run for real: torch's version as the probe in a child interpreter reads it, one-line usage errors
(exit 2), a probe that fails or an interpreter without torch reported with exit 0, the Slurm placement from SLURM_*,
torch kept out of pai-launch's own process, and a script named `env` still run as `./env`."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import FAKE_TRAINER, PYTHON, launch_env
from tests.proc.test_supervisor_torch_free import AUDITED_ENTRY, REFUSED

pytestmark = pytest.mark.timeout(120)

STEP = {"SLURM_JOB_ID": "77", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_NODEID": "1",
        "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_GPUS_ON_NODE": "2",
        "SLURM_NTASKS_PER_NODE": "1"}


def env_tool(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
             entry: tuple[str, ...] = ("-m", "pai_launch")) -> subprocess.CompletedProcess:
    """`pai-launch env ARGS` in tmp_path/work, run to its end (the probe imports torch: seconds on a loaded machine)."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run([PYTHON, *entry, "env", *args], cwd=work, env=launch_env(tmp_path, env), capture_output=True,
                          text=True, timeout=100, stdin=subprocess.DEVNULL)


def test_the_json_names_the_torch_installed_here(tmp_path):
    done = env_tool(tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["probe"]["status"] == "ok", facts["probe"]
    assert facts["torch"]["version"] == importlib.metadata.version("torch")
    assert facts["packages"]["torch"] == importlib.metadata.version("torch")
    assert facts["python"]["executable"] == facts["pai_launch"]["python"] == PYTHON
    assert facts["gpus"]["cuda_visible_devices"] == ""  # the tests hide every GPU
    assert facts["placement"]["slurm"] is False and facts["options"]["nproc"] == 1


def test_the_text_is_aligned_lines_naming_torch(tmp_path):
    done = env_tool(tmp_path, env={"PAI_LAUNCH_GRACE": "7"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    torch_line = next(line for line in lines if line.startswith("torch:"))
    assert importlib.metadata.version("torch") in torch_line
    column = {len(line) - len(line.split(": ", 1)[1].lstrip()) for line in lines if not line.startswith(" ")}
    assert len(column) == 1, column
    assert "grace:                7 s" in lines and "                      PAI_LAUNCH_GRACE=7" in lines


@pytest.mark.parametrize("args, names", [
    (["--python", "/nonexistent"], "--python /nonexistent: no such file"),
    (["--python", "/"], "--python / is not an executable file"),
    (["--timeout", "0"], "--timeout 0 is not a number of seconds"),
    (["--bogus"], "No such option: --bogus (see pai-launch env --help)"),
])
def test_bad_usage_is_one_line_and_exit_2(tmp_path, args, names):
    done = env_tool(tmp_path, *args)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pai-launch: error: ") and names in lines[0], done.stderr


def test_a_probe_that_fails_is_reported_and_exits_0(tmp_path):
    done = env_tool(tmp_path, "--json", "--python", shutil.which("false") or "/bin/false")
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert (facts["probe"]["status"], facts["probe"]["detail"]) == ("failed", "exit code 1")
    assert facts["torch"] is None and facts["python"] is None


def test_an_interpreter_without_torch_is_reported_and_exits_0(tmp_path):
    """The same Python without its site-packages: torch is missing there, which is what the report is for."""
    bare = tmp_path / "bare-python"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    done = env_tool(tmp_path, "--python", str(bare))
    assert done.returncode == 0, done.stderr
    shown = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in done.stdout.splitlines()
             if not line.startswith(" ")}
    assert shown["probe"].startswith("ok in") and f"({bare})" in shown["probe"]
    assert shown["torch"] == "not importable: ModuleNotFoundError: No module named 'torch'"
    assert shown["perforatedai"] == "not installed"


def test_a_slurm_step_shows_the_placement_a_launch_would_take(tmp_path):
    done = env_tool(tmp_path, "--json", env=STEP)
    assert done.returncode == 0, done.stderr
    place = json.loads(done.stdout)["placement"]
    assert (place["slurm"], place["nnodes"], place["node_rank"], place["rendezvous"], place["rdzv_id"]) == \
        (True, "2", 1, "gpu01:29477", "slurm-77")
    assert "--nproc 2 (SLURM_GPUS_ON_NODE)" in place["taken"]

    text = env_tool(tmp_path, env=STEP).stdout
    assert "slurm:                job 77\n" in text
    assert "placement:            node 1 of 2, rendezvous store at gpu01:29477, rendezvous id slurm-77\n" in text
    assert "                      SLURM_NTASKS_PER_NODE" not in text  # a launch does not read it


def test_a_slurm_environment_a_launch_would_refuse_is_shown_with_its_error(tmp_path):
    outside_srun = {k: v for k, v in STEP.items() if not k.startswith("SLURM_STEP")}
    done = env_tool(tmp_path, env=outside_srun)
    assert done.returncode == 0, done.stderr
    assert "launch:               refused: this Slurm job has 2 nodes but pai-launch is not running under srun" \
        in done.stdout


def test_torch_stays_out_of_pai_launchs_own_process(tmp_path):
    imported = tmp_path / "imported.txt"
    done = env_tool(tmp_path, "--json", entry=("-c", AUDITED_ENTRY, str(imported)))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["torch"]["version"] == importlib.metadata.version("torch")  # the child imported it
    modules = set(imported.read_text().split())
    assert "pai_launch.cli.envfacts" in modules  # the hook saw the tool's own imports
    leaked = sorted(m for m in modules if any(m == name or m.startswith(name + ".") for name in REFUSED))
    assert leaked == [] and "pai_launch.envreport.probe" not in modules, leaked[:10]


def test_a_script_named_env_runs_as_dot_slash_env(scene):
    shutil.copy(FAKE_TRAINER, scene.work / "env")
    os.chmod(scene.work / "env", 0o755)
    launch = scene.start("--nproc", "1", script="./env", script_args=["--generations", "1"])
    assert launch.wait(60) == 0, launch.log_summary()
    assert launch.event("run_finished")["exit_code"] == 0
    assert [r["init"] for r in scene.records()] == [True, False]
