"""`pai-launch doctor` and `pai-launch status` from the command line: their exit codes, one-line errors, no launch
signal handlers (Ctrl-C stops `status --watch` at once); a script named `status` still runs as `./status`; a launch
runs doctor first and warns, never blocks (`--no-doctor` skips it)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import FAKE_TRAINER, run_tool, wait_until
from tests.proc.launch_files import wait_event

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
GUIDE_PATTERN = ROOT / "tests" / "doctor_scripts" / "broken" / "guide_pattern.py"
FLAGGED = Path(__file__).resolve().parent / "doctor_flagged_trainer.py"


tool = run_tool


def test_doctor_reports_a_broken_script_with_exit_1_and_a_clean_one_with_0(tmp_path):
    broken = tool("doctor", str(GUIDE_PATTERN), cwd=tmp_path)
    assert broken.returncode == 1, broken.stderr
    assert f"{GUIDE_PATTERN}:" in broken.stdout and "error[ddp-broadcast-buffers]" in broken.stdout
    assert broken.stdout.rstrip().endswith("3 errors, 1 warning")

    as_json = json.loads(tool("doctor", "--json", str(GUIDE_PATTERN), cwd=tmp_path).stdout)
    assert as_json["errors"] == 3 and {f["id"] for f in as_json["findings"]} >= {"perforate-model-race"}

    clean = tool("doctor", str(ROOT / "examples" / "train_pai_ddp.py"), cwd=tmp_path)
    assert clean.returncode == 0 and clean.stdout.rstrip().endswith("no problems found"), clean.stdout


def test_doctor_names_the_save_name_mismatch(tmp_path):
    done = tool("doctor", "--save-name", "runs/a", str(ROOT / "examples" / "train_pai_ddp.py"), cwd=tmp_path)
    assert done.returncode in (0, 1) and "runs/a" in done.stdout, done.stdout


@pytest.mark.parametrize("content, problem", [(None, "No such file"), ("def broken(:\n", "train.py:1: syntax error")])
def test_doctor_on_a_script_it_cannot_read_is_one_line_and_exit_2(tmp_path, content, problem):
    script = tmp_path / "train.py"
    if content is not None:
        script.write_text(content)
    done = tool("doctor", "train.py", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pai-launch: error: ") and "train.py" in lines[0], done.stderr
    assert problem.lower() in lines[0].lower()


def test_a_bad_tool_option_is_one_line_and_exit_2(tmp_path):
    done = tool("status", "--bogus", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "pai-launch: error: No such option: --bogus (see pai-launch status --help)"], done.stderr


def test_status_of_a_folder_that_is_not_a_save_folder_is_exit_2(tmp_path):
    (tmp_path / "PAI").mkdir()
    done = tool("status", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "PAI" in done.stderr


def test_help_lists_the_tools(tmp_path):
    done = tool("--help", cwd=tmp_path)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # however the help is wrapped
    assert "pai-launch doctor SCRIPT" in text and "pai-launch status [SAVE]" in text \
        and "pai-launch env [--json]" in text


def test_status_watch_stops_at_once_on_ctrl_c_and_shows_the_live_run(scene):
    launch = scene.start("--nproc", "1", script_args=["--hang"])
    scene.wait_ready(1, 1)
    watch = subprocess.Popen([sys.executable, "-m", "pai_launch", "status", "--watch", "--interval", "0.2", "PAI"],
                             cwd=scene.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: (scene.work / "PAI").is_dir(), 10)
        out = []
        # The first frame names the running supervisor; then Ctrl-C, as a terminal sends it.
        line = watch.stdout.readline()
        while line and "supervisor:" not in line:
            out.append(line)
            line = watch.stdout.readline()
        assert "running" in line and str(launch.pid) in line, "".join(out) + line
        # Its later frames (and anything on stderr) are drained, so a full pipe can never hold its exit back.
        for stream in (watch.stdout, watch.stderr):
            threading.Thread(target=stream.read, daemon=True).start()
        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == 0, "no launch signal handler holds the SIGINT back"
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
        watch.stdout.close()
        watch.stderr.close()
    launch.send(signal.SIGTERM)
    assert launch.wait(60) == 143


def test_a_script_named_status_runs_as_dot_slash_status(scene):
    shutil.copy(FAKE_TRAINER, scene.work / "status")
    launch = scene.start("--nproc", "1", script="./status", script_args=["--generations", "1"])
    assert launch.wait(60) == 0, launch.log_summary()
    assert launch.event("run_finished")["exit_code"] == 0
    assert [r["init"] for r in scene.records()] == [True, False]


def test_a_launch_warns_of_the_scripts_problems_and_runs_it_anyway(scene):
    launch, rc = scene.run("--nproc", "1", script=FLAGGED, script_args=["--generations", "1"])

    assert rc == 0, launch.log_summary()
    problems = {e["id"]: e for e in launch.events("script_problem")}
    wrapper_line = next(n for n, line in enumerate(FLAGGED.read_text().splitlines(), 1)
                        if "DistributedDataParallel(" in line)
    assert "ddp-broadcast-buffers" in problems and problems["ddp-broadcast-buffers"]["line"] == wrapper_line
    assert "broadcast_buffers=False" in problems["ddp-broadcast-buffers"]["fix"]
    summary = launch.event("script_check")
    assert summary["errors"] == len(problems) and "--no-doctor" in summary["hint"]
    assert {e["run_id"] for e in launch.events()} == {launch.event("run_started")["run_id"]}


def test_no_doctor_skips_the_check(scene):
    launch, rc = scene.run("--nproc", "1", "--no-doctor", script=FLAGGED, script_args=["--generations", "1"])

    assert rc == 0, launch.log_summary()
    assert launch.events("script_problem") == [] and launch.events("script_check") == []


def test_a_script_that_loads_latest_pt_is_resumed_from_it_by_default(scene):
    """doctor reads which stage the script loads; --resume-from's default follows it."""
    script = scene.work / "latest_loader.py"
    text = FLAGGED.read_text()
    for old, new in [("    return torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)",
                      "    return UPA.load_system(model, 'PAI', 'latest', True)"),
                     ('str(Path(__file__).resolve().parent.parent / "fake_trainer.py")', repr(str(FAKE_TRAINER)))]:
        assert old in text
        text = text.replace(old, new)
    script.write_text(text)
    crash = ["--heartbeat", "0.05", "--train-seconds", "0.4", "--fail-rank", "0", "--fail-generation", "1",
             "--generations", "2", "--load-stage", "latest"]
    launch, rc = scene.run("--nproc", "1", "--backoff", "0.1", script=script, script_args=crash)

    assert rc == 0, launch.log_summary()
    starts = [(e["generation"], e["load_folder"]) for e in launch.events("generation_started")]
    assert starts == [(1, None), (2, "PAI")]
    wait_event(launch, "run_finished", 5)
