"""`pai-launch status`'s engine against real pai-launch runs of the fake trainer: a live run shows its supervisor
(PID alive, this machine) and the running generation; a finished, stopped or killed run shows its
generations and how each ended. (A failed and retried generation's listing: tests/unit/test_histories_blame.py.)"""

from __future__ import annotations

import io
import json
import os
import signal

import psutil
import pytest

from pai_launch.status import gather as run_status
from tests.helpers import pid_is_live, wait_until
from tests.proc.conftest import GENERATION_TIMEOUT

pytestmark = pytest.mark.timeout(150)


def test_live_run_shows_its_supervisor_and_the_finished_run_its_generations(scene):
    launch = scene.start("--nproc", "2", script_args=["--hold-until", str(scene.hold_file)])
    save = scene.work / "PAI"
    scene.wait_ready(1, 2)
    live = run_status.gather(save)
    assert live.state == "running", run_status.render_text(live)
    sup = live.supervisor
    assert sup is not None and sup.running and sup.pid == launch.pid and pid_is_live(sup.pid)
    assert sup.host == os.uname().nodename and sup.since == pytest.approx(psutil.Process(launch.pid).create_time(),
                                                                          abs=1)
    assert live.generations[-1].number == 1 and live.generations[-1].outcome == "running"
    assert live.phase.startswith("generation 1 running for") and live.ended is None
    assert live.init is not None and live.init.ok
    out = io.StringIO()
    assert run_status.main(save, as_json=True, watch=False, timeline=None, out=out) == 0
    assert json.loads(out.getvalue())["supervisor"]["pid"] == launch.pid

    scene.hold_file.write_text("go")
    assert launch.wait(GENERATION_TIMEOUT * 3) == 0, launch.log_summary()
    done = run_status.gather(save)
    assert (done.state, done.exit_code, done.exit_reason) == ("finished", 0, "training complete")
    assert [g.outcome for g in done.generations] == ["restructured", "restructured", "complete"]
    assert [g.switch_files for g in done.generations] == [["switch_2.pt"], ["switch_4.pt"], []]
    assert done.dendrites.count == 2 and done.complete
    assert not done.supervisor.running and not pid_is_live(launch.pid)
    assert done.elapsed is not None and done.elapsed > 0


def test_killed_pai_launch_leaves_an_interrupted_run(scene):
    launch = scene.start("--nproc", "2", script_args=["--hold-until", str(scene.hold_file)])
    scene.wait_ready(1, 2)
    assert run_status.gather(scene.work / "PAI").state == "running"
    launch.send(signal.SIGKILL)
    launch.wait(10)
    status = wait_until(lambda: (lambda s: s if s.state != "running" else None)(run_status.gather(scene.work / "PAI")),
                        10, message="the status to see the supervisor gone")
    assert status.state == "interrupted" and not status.supervisor.running
    assert status.generations[-1].outcome == "interrupted" and "resumes" in status.phase


def test_sigterm_stopped_run_is_stopped_with_143(scene):
    launch = scene.start("--nproc", "2", script_args=["--hold-until", str(scene.hold_file)])
    scene.wait_ready(1, 2)
    launch.send(signal.SIGTERM)
    assert launch.wait(GENERATION_TIMEOUT) == 143
    status = run_status.gather(scene.work / "PAI")
    assert (status.state, status.exit_code) == ("finished", 143)
    assert status.generations[-1].outcome == "stopped" and "SIGTERM" in status.generations[-1].detail
