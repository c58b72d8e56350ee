"""A real perforatedai run that never stops adding dendrites (its capacity test turned off after perforate_model):
pai-launch names it once it passes the test's 3 dendrites, in the log and in status, and --max-dendrites stops it."""

import os

import pytest

from tests.helpers import REPO, is_live, run_pai_launch, run_tool

SCRIPT = REPO / "tests" / "real" / "runaway_script.py"


@pytest.mark.timeout(400)
def test_a_real_runaway_is_named_and_max_dendrites_stops_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    launch, seen = run_pai_launch(["--log-format", "json", "--nproc", "1", "--max-dendrites", "5", str(SCRIPT)],
                                  cwd=tmp_path, env=env, timeout=360)

    assert launch.popen.returncode == 0, launch.stderr[-4000:]
    assert [p for p in seen if is_live(p)] == []
    events = launch.events()
    (past,) = [e for e in events if e["event"] == "dendrites_past_maximum"]
    assert (past["dendrites"], past["max_dendrites"]) == (4, 3), past
    assert "capacity test" in past["limit_from"] and "--max-dendrites" in past["hint"]
    finished = events[-1]
    assert finished["event"] == "run_finished" and "--max-dendrites 5 reached" in finished["reason"]
    assert sum(e["event"] == "generation_started" for e in events) == 5
    shown = run_tool("status", cwd=tmp_path).stdout
    assert "5 of at most 3, PAST THE MAXIMUM (PerforatedAI's dendrite capacity test" in shown, shown
    assert "dendrites_past_maximum" in shown
