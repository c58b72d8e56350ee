"""-m MODULE and --no-python with the real pai-launch: a module's warm workers see what cold ones (`python -u -m`) see,
and a program that is not Python runs every phase cold, through restarts to completion."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.helpers import FAKE_TRAINER, PYTHON
from tests.proc.test_warm_workers import PROBE, alike_reports

pytestmark = pytest.mark.timeout(180)


def test_a_modules_warm_workers_see_what_python_dash_m_gives_cold_ones(scene):
    shutil.copy(PROBE, scene.work / "probe_mod.py")
    launches = {}
    for mode in ("cold", "warm"):
        launch, rc = scene.run("-m", "--nproc", "2", "--max-failures", "1", *(["--cold"] if mode == "cold" else []),
                               "--fresh", script="probe_mod", instrument=False, timeout=120,
                               script_args=["--out", str(scene.io / "out"), "--generations", "2"])
        assert rc == 0, launch.log_summary()
        launches[mode] = launch
        (scene.io / "out").rename(scene.io / mode)
    assert [launch.event("agent_ready")["workers"] for launch in launches.values()] == ["cold", "warm"]
    cold, warm = alike_reports(scene.io / "cold", scene.io / "warm")
    module_file = str(scene.work / "probe_mod.py")
    for report in (cold["0-0"], warm["1-0"], warm["2-1"]):  # the init run too: python -m
        assert (report["name"], report["file"], report["argv"][0]) == ("__main__", module_file, module_file)
        assert report["path"][0] == str(scene.work)
    assert warm["2-0"]["argv"][-2:] == ["--pai_load_folder", "PAI"]


def test_a_program_that_is_not_python_runs_cold_through_restarts_to_completion(scene):
    program = scene.io / "train.sh"
    program.write_text(f'#!/bin/sh\nexec "{PYTHON}" "{FAKE_TRAINER}" "$@"\n')
    program.chmod(0o755)
    launch, rc = scene.run("--no-python", "--nproc", "2", script=program, script_args=["--generations", "2"])
    assert rc == 0, launch.log_summary()
    assert launch.event("agent_ready")["workers"] == "cold"
    note = launch.event("torchrun_flag_mapped")
    assert (note["flag"], note["as_option"]) == ("--no-python", "--cold")
    assert "script_check" not in launch.event_names() and "script_check_failed" not in launch.event_names()
    records = scene.records()
    assert [record["env"]["PAI_LAUNCH_GENERATION"] for record in records] == ["0", "1", "1", "2", "2"]
    assert records[0]["argv"][0] == "--perforate_model_parallel"
    assert (scene.work / "PAI" / ".training_complete").is_file()


def test_a_program_given_as_dot_slash_runs_that_file_not_one_of_the_same_name_on_path(scene):
    real = scene.work / "prog"
    real.write_text(f'#!/bin/sh\nexec "{PYTHON}" "{FAKE_TRAINER}" "$@"\n')
    real.chmod(0o755)
    decoy_dir = scene.io / "bin"
    decoy_dir.mkdir()
    (decoy_dir / "prog").write_text("#!/bin/sh\necho decoy >&2\nexit 9\n")
    (decoy_dir / "prog").chmod(0o755)
    path = f"{decoy_dir}:{os.environ.get('PATH', os.defpath)}"
    launch, rc = scene.run("--no-python", "--nproc", "1", script="./prog", script_args=["--generations", "1"],
                           env={"PATH": path})
    assert rc == 0, launch.log_summary()
    assert (scene.work / "PAI" / ".training_complete").is_file() and "decoy" not in launch.stderr
    launch, rc = scene.run("--no-python", "--dry-run", script="./prog", instrument=False, env={"PATH": "/nonexistent"})
    assert rc == 0 and "no such program on PATH" not in launch.stderr, launch.stderr


def test_a_program_that_cannot_run_is_refused_before_anything_starts(scene):
    program = scene.io / "train.sh"
    program.write_text("#!/bin/sh\n")
    launch, rc = scene.run("--no-python", script=program, instrument=False)
    assert rc == 2
    assert "is not executable: chmod +x" in launch.stderr and "\n" not in launch.stderr.strip()
    launch, rc = scene.run("-m", script="no_such_module_here", instrument=False)
    assert rc == 2 and "-m no_such_module_here: no such module" in launch.stderr
    assert scene.work_listing() == []
