"""Real perforatedai: minimal_ddp.py made to train, broken in the ways the other real fix runs do not cover (the init
run's flag missing, a barrier in the init run, the old initialize_pai, training on in the same process after a
restructure; the init run not exiting; its settings saved before the backward pass), fixed by `pai-launch doctor
--fix` alone, then run by pai-launch --nproc 2 from the init run to completion."""

import os
import subprocess
import sys

import pytest

from pai_launch.doctor.diagnose import check_script
from tests.helpers import REPO, is_live, run_pai_launch
from tests.real.test_fix_protocol_real import broken_script
from tests.unit.doctor_mutations import MUTATIONS

pytestmark = pytest.mark.timeout(400)

INIT_BLOCK = "        if init_run:\n            GPA.pai_tracker.save_tracker_settings()\n            sys.exit(0)\n"
BACKWARD = "        nn.functional.cross_entropy(model(x), y).backward()\n"
RENAMED = ("UPA.perforate_model(nn.Sequential", "UPA.initialize_pai(nn.Sequential")

#: case -> (edits before the script is made to train, edits after, the findings doctor must report before the fix)
BROKEN = {
    "flags_barrier_rename_same_process": (
        [MUTATIONS["no_flags"], MUTATIONS["init_barrier"], MUTATIONS["restructure_same_process"]], [RENAMED],
        {"flag-perforate-model-parallel", "flag-pai-load-folder", "init-barrier-unguarded", "initialize-pai-removed",
         "restructure-no-exit"}),
    "init_no_exit": ([MUTATIONS["init_no_exit"]], [], {"init-no-exit"}),
    "exit_before_backward": ([(BACKWARD + INIT_BLOCK, INIT_BLOCK + BACKWARD)], [], {"init-exit-before-backward"}),
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_a_script_fixed_by_doctor_fix_alone_trains_to_completion(tmp_path, broken):
    edits, after, expected = BROKEN[broken]
    script = broken_script(tmp_path, edits)
    text = script.read_text()
    for old, new in after:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    script.write_text(text)
    assert expected <= {f.id for f in check_script(script).findings}

    env = {**os.environ, "PYTHONPATH": str(REPO / "supervisor") + os.pathsep + str(REPO)}
    fixed = subprocess.run([sys.executable, "-m", "pai_launch", "doctor", "--fix", str(script)], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert {line.rsplit(": ", 1)[1] for line in fixed.stdout.splitlines() if line.startswith("fixed ")} >= expected
    assert check_script(script).findings == (), fixed.stdout
    assert (tmp_path / "train.py.orig").read_text() == text

    done, seen = run_pai_launch(["--log-format", "json", "--nproc", "2", "--backoff", "0.2", str(script)],
                                cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=380)
    events = done.events()
    assert done.popen.returncode == 0, done.stderr[-4000:]
    assert any(e["event"] == "init_exited" for e in events)
    assert (tmp_path / "PAI" / ".training_complete").is_file()
    starts = [e["load_folder"] for e in events if e["event"] == "generation_started"]
    assert len(starts) >= 2 and starts[1:] == ["PAI"] * (len(starts) - 1), starts
    assert events[-1]["event"] == "run_finished" and events[-1]["exit_code"] == 0
    assert [p for p in seen if is_live(p)] == []
