"""Tier 3: a real perforatedai script with seven mistakes `pai-launch doctor --fix` edits away (an option's spelling,
the prompt-free confirmations, the capacity test's order, DDP's two flags, the wrapper scored), fixed and then run by
`pai-launch --nproc 2` to completion."""

import os
import shutil

import pytest

from tests.helpers import REPO, is_live, run_pai_launch, run_tool

SCRIPT = REPO / "tests" / "real" / "fixable_script.py"
FIXES = ["flag-pai-load-folder", "prompt-configuration-confirmed", "prompt-unwrapped-modules",
         "testing-dendrite-capacity-late", "ddp-find-unused-parameters", "ddp-broadcast-buffers",
         "validation-score-wrapped-model"]


@pytest.mark.timeout(400)
def test_a_script_doctor_fixed_runs_to_completion_under_ddp(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SCRIPT, work / "train.py")
    fixed = run_tool("doctor", "--fix", "train.py", cwd=work)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.splitlines() == ["the original is in train.py.orig", *(f"fixed train.py: {i}" for i in FIXES),
                                         "7 fixes made; no problems left"]

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    launch, seen = run_pai_launch(["--log-format", "json", "--backoff", "0.1", "--nproc", "2", "train.py"], cwd=work,
                                  env=env, timeout=340)
    assert launch.popen.returncode == 0, launch.stderr[-4000:]
    assert [p for p in seen if is_live(p)] == []
    events = launch.events()
    assert not [e for e in events if e["event"] in ("script_problem", "generation_failed")], events
    generations = [e for e in events if e["event"] == "generation_started"]
    assert len(generations) >= 2 and all(e["load_folder"] == "PAI" for e in generations[1:]), generations
    assert (work / "PAI" / ".training_complete").is_file()
    assert events[-1]["event"] == "run_finished" and events[-1]["exit_code"] == 0
