"""`pai-launch status`'s engine on synthetic save folders: events.jsonl, state.json, PerforatedAI's CSVs and
switch files written by hand. The folder's lock is a real SaveFolderLock taken by the test where a live
supervisor is needed."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pai_launch.savefmt.locks import SaveFolderLock
from pai_launch.savefmt.pai_files import dendrites, scores
from pai_launch.status import gather as run_status
from pai_launch.status.events import history, parse_lines
from pai_launch.status.live import flock_holders, judge
from pai_launch.status.model import StatusError
from pai_launch.status.story import refine_start
from pai_launch.status.timeline import score_points, spans
from tests.helpers import REPO, safetensors_bytes, tree_state

pytestmark = pytest.mark.timeout(30)

T0 = 1_796_000_000  # a whole second, UTC
SCORES = "Epochs,Validation Scores,Validation Running Scores\n" + "".join(
    f"{e},{s},\n" for e, s in enumerate([1.25, 1.04, 0.79, 0.58, 0.43, 0.35])) + "".join(
    f"{e},,{s}\n" for e, s in enumerate([1.25, 1.04, 0.79, 0.58, 0.43, 0.35]))
PARAM_COUNTS = "Switch Number,Param Count\n0,612\n1,1260\n2,1260\n3,2016\n4,2016\n"
SWITCH_EPOCHS = "Switch Number,Switch Epoch\n0,1\n1,1\n2,3\n3,3\n"
ARCH = "Param Counts,Max Valid Scores\n612,1.04\n1260,0.58\n2016,0.35\n"


def stamp(offset: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + offset))


def ev(offset: float, name: str, **fields) -> dict:
    return {"time": stamp(offset), "level": "info", "run_id": "r1", **fields, "event": name}


FINISHED = [
    ev(0, "run_started", pid=999_999, resumed=False, generation=0, failures=0),
    ev(0, "init_started", pid=1),
    ev(6, "init_exited", exit="exit code 0", duration_s=5.7),
    ev(6, "generation_started", generation=1, load_folder=None),
    ev(9, "dendrites_added", switch=2, file="switch_2.pt", generation=1),
    ev(10, "generation_ended", generation=1, duration_s=4.2, complete=False, switch_files=["switch_2.pt"],
       exit="all workers exited 0"),
    ev(10, "generation_started", generation=2, load_folder="PAI"),
    ev(13, "generation_failed", generation=2, duration_s=3.1, complete=False, switch_files=[], rank=1,
       exit="exit code 3", failed_ranks=[1, 0], reached_training=True),
    ev(13, "worker_log_tail", rank=1, tail="Traceback ...\nKeyError: 'best_mean_score_imp'"),
    ev(13, "retry_scheduled", delay_s=1.0, failures=1, max_failures=3, reason="rank 1 failed with exit code 3"),
    ev(14, "generation_started", generation=3, load_folder="PAI"),
    ev(18, "dendrites_added", switch=4, file="switch_4.pt", generation=3),
    ev(18, "generation_ended", generation=3, duration_s=4.0, complete=False, switch_files=["switch_4.pt"]),
    ev(18, "generation_started", generation=4, load_folder="PAI"),
    ev(22, "completion_marker_seen", generation=4),
    ev(22, "generation_ended", generation=4, duration_s=3.6, complete=True, switch_files=[]),
    ev(22, "run_finished", exit_code=0, reason="training complete", generations=4, duration_s=22.4),
]


def write_events(save: Path, events: list[dict], tail: str = "") -> None:
    (save / ".pai-launch").mkdir(parents=True, exist_ok=True)
    (save / ".pai-launch" / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events) + tail)


def write_pai_files(save: Path, *, config: dict | None = None, graphs: bool = True, marker: bool = True) -> None:
    save.mkdir(parents=True, exist_ok=True)
    (save / "array_dims.csv").write_text(".fc1,1,16\n")
    os.utime(save / "array_dims.csv", (T0 + 1, T0 + 1))
    for number, when in ((2, 9), (4, 18)):
        (save / f"switch_{number}.pt").write_bytes(safetensors_bytes(b"x" * number))
        os.utime(save / f"switch_{number}.pt", (T0 + when, T0 + when))
    if graphs:
        (save / "PAI_config.json").write_text(json.dumps(config if config is not None else
                                                         {"maximizing_score": False, "max_dendrites": 2}))
        (save / "PAIScores.csv").write_text(SCORES)
        (save / "PAIparam_counts.csv").write_text(PARAM_COUNTS)
        (save / "PAIswitch_epochs.csv").write_text(SWITCH_EPOCHS)
        (save / "PAI_best_arch_scores.csv").write_text(ARCH)
    if marker:
        (save / ".training_complete").write_text("complete\n")
        os.utime(save / ".training_complete", (T0 + 22, T0 + 22))


def write_state(save: Path, **fields) -> None:
    record = {"fingerprint": {"script": "/w/train.py", "script_args": ["--epochs", "3"], "nproc": 2,
                              "pai_launch": "0.1.0"},
              "run_id": "r1", "save_name": "PAI", "generation": 4, "failures": 0, "init_done": True,
              "last_switch": "switch_4.pt", "last_exit": {"code": 0, "reason": "training complete"}, **fields}
    (save / ".pai-launch").mkdir(parents=True, exist_ok=True)
    (save / ".pai-launch" / "state.json").write_text(json.dumps(record))
    (save / ".pai-launch" / "lock.node0").write_text("999999\n")  # a PID no process has


@pytest.fixture
def finished(tmp_path) -> Path:
    save = tmp_path / "PAI"
    write_pai_files(save)
    write_events(save, FINISHED)
    write_state(save)
    return save


# --- a finished run -------------------------------------------------------------------------------
def test_finished_run_lists_each_generation_with_how_it_ended(finished):
    status = run_status.gather(finished)
    assert (status.source, status.state, status.exit_code) == ("pai-launch", "finished", 0)
    assert [(g.number, g.outcome) for g in status.generations] == [
        (1, "restructured"), (2, "failed"), (3, "restructured"), (4, "complete")]
    failed = status.generations[1]
    assert (failed.rank, failed.exit) == (1, "exit code 3")
    assert "rank 1 failed with exit code 3" in failed.detail and "KeyError: 'best_mean_score_imp'" in failed.detail
    assert status.generations[0].switch_files == ["switch_2.pt"] and status.generations[2].switch_files == \
        ["switch_4.pt"]
    assert status.generations[0].duration == 4.2
    assert (status.failures, status.retries) == (1, 1)
    assert [p.kind for p in status.problems] == ["retry_scheduled"]
    assert status.init is not None and status.init.ok and status.init.duration == 5.7
    assert (status.run_id, status.nproc, status.script) == ("r1", 2, "/w/train.py")
    assert status.elapsed == pytest.approx(22, abs=0.01) and status.complete


def test_finished_run_reads_dendrites_and_best_score_from_perforatedai_files(finished):
    status = run_status.gather(finished)
    assert (status.dendrites.count, status.dendrites.source) == (2, "PAIparam_counts.csv")
    assert status.dendrites.param_counts == [612, 1260, 2016] and status.dendrites.epochs == [1, 3]
    assert status.dendrites.max_dendrites == 2
    s = status.scores
    assert (s.best, s.best_epoch, s.direction) == (0.35, 5, "minimizing")
    assert "PAI_config.json says maximizing_score false" in s.direction_how
    assert s.trend == "improving" and len(s.epochs) == 6


def test_finished_runs_supervisor_is_not_running(finished):
    status = run_status.gather(finished)
    (sup,) = status.supervisors
    assert (sup.node, sup.running, sup.pid) == (0, False, 999_999)
    assert "not running" in run_status.render_text(status).split("supervisor:")[1].splitlines()[0]


def test_text_shows_state_generations_dendrites_and_best_score(finished):
    text = run_status.render_text(run_status.gather(finished))
    assert "finished: exit code 0 (training complete)" in text
    assert "dendrites:   2 of at most 2" in text and "612 -> 1260 -> 2016" in text
    assert "best score:  0.35 at epoch 5" in text and "minimizing" in text
    assert "1 failed generation(s), 1 retry" in text
    lines = [line for line in text.splitlines() if line.strip().startswith("generation ")]
    assert len(lines) == 4 and "failed: rank 1 failed with exit code 3" in lines[1] and "switch_4.pt" in lines[2]
    assert "complete" in lines[3]


def test_json_has_stable_sorted_keys_and_iso_times(finished):
    status = run_status.gather(finished)
    text = run_status.render_json(status)
    data = json.loads(text)
    assert text == run_status.render_json(status)
    assert list(data) == sorted(data) and data["format"] == 1
    assert data["state"] == "finished" and data["exit_code"] == 0
    assert data["generations"][1]["outcome"] == "failed" and data["generations"][1]["rank"] == 1
    assert data["started"] == stamp(0).replace("Z", ".000Z")
    assert data["scores"]["epochs"][5] == {"epoch": 5, "score": 0.35}
    assert data["supervisor"]["running"] is False and data["dendrites"]["count"] == 2
    assert "\n" not in run_status.render_json(status, indent=None)


def test_gather_writes_nothing_into_the_save_folder(finished):
    before = tree_state(finished)
    run_status.gather(finished)
    assert tree_state(finished) == before


# --- folders pai-launch never ran, or not save folders -------------------------------------------
def test_folder_pai_launch_never_ran_gets_generations_from_switch_files(tmp_path):
    save = tmp_path / "PAI"
    write_pai_files(save, graphs=False)
    status = run_status.gather(save)
    assert (status.source, status.state) == ("perforatedai", "finished")
    assert [(g.number, g.outcome, g.switch_files) for g in status.generations] == [
        (1, "restructured", ["switch_2.pt"]), (2, "restructured", ["switch_4.pt"]), (3, "complete", [])]
    assert [g.duration for g in status.generations] == [pytest.approx(8), pytest.approx(9), pytest.approx(4)]
    assert all(g.inferred for g in status.generations) and status.init.inferred
    assert (status.dendrites.count, status.dendrites.source) == (2, "switch_4.pt")
    assert status.supervisors == [] and status.scores.best is None
    assert "inferred from PerforatedAI's files" in run_status.render_text(status)


def test_unfinished_folder_without_pai_launch_says_it_cannot_tell(tmp_path):
    save = tmp_path / "PAI"
    write_pai_files(save, graphs=False, marker=False)
    (save / "latest.pt").write_bytes(b"x")
    os.utime(save / "latest.pt", (T0 + 30, T0 + 30))
    status = run_status.gather(save)
    assert status.state == "unknown" and status.generations[-1].outcome == "unknown"
    assert "cannot be told" in status.phase


@pytest.mark.parametrize("make, message", [
    (lambda root: root / "missing", "no such folder"),
    (lambda root: (root / "file").write_text("x") and root / "file", "is not a folder"),
    (lambda root: (root / "other").mkdir() or root / "other", "is not a save folder: no .pai-launch/ and no "
     "PerforatedAI files"),
])
def test_bad_folder_is_one_line_and_exit_2(tmp_path, capsys, make, message):
    folder = make(tmp_path)
    with pytest.raises(StatusError, match=message):
        run_status.gather(folder)
    assert run_status.main(folder, as_json=False, watch=False, timeline=None, out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pai-launch: error: ") and str(folder) in err


# --- live, interrupted, resumed, stopped ---------------------------------------------------------
def test_live_run_shows_the_supervisor_holding_the_lock_and_the_running_generation(tmp_path):
    save = tmp_path / "PAI"
    write_pai_files(save, marker=False)
    now = time.time() - T0
    write_events(save, [ev(now - 30, "run_started", pid=os.getpid()), ev(now - 20, "generation_started", generation=1)])
    lock = SaveFolderLock(save)
    lock.acquire()  # this test process plays the supervisor: the same two locks pai-launch takes
    try:
        status = run_status.gather(save)
    finally:
        lock.release()
    assert status.state == "running" and status.ended is None
    (sup,) = status.supervisors
    assert (sup.running, sup.pid, sup.host) == (True, os.getpid(), os.uname().nodename)
    assert sup.since is not None and sup.since <= time.time()
    assert status.generations[0].outcome == "running" and status.phase.startswith("generation 1 running for")
    after = run_status.gather(save)  # the lock released: the supervisor is gone without a run_finished
    assert after.state == "interrupted" and after.generations[0].outcome == "interrupted"
    assert "the same command resumes the run" in after.phase


def test_generation_of_a_killed_pai_launch_is_interrupted_and_the_resume_is_a_second_session(tmp_path):
    save = tmp_path / "PAI"
    write_pai_files(save)
    write_events(save, [*FINISHED[:7], ev(30, "run_started", pid=2, resumed=True),
                        ev(31, "generation_started", generation=3),
                        ev(35, "generation_ended", generation=3, duration_s=4, complete=True),
                        ev(35, "run_finished", exit_code=0, reason="training complete")])
    status = run_status.gather(save)
    assert [(g.number, g.outcome, g.session) for g in status.generations] == [
        (1, "restructured", 0), (2, "interrupted", 0), (3, "complete", 1)]
    assert len(status.sessions) == 2 and status.sessions[1].resumed
    assert "1 resume(s) of pai-launch" in run_status.render_text(status)


def test_lines_logged_before_run_started_belong_to_that_start(tmp_path):
    save = tmp_path / "PAI"
    write_pai_files(save)
    write_events(save, [ev(0, "metrics_serving", url="http://127.0.0.1:9400/metrics"), *FINISHED])
    status = run_status.gather(save)
    assert len(status.sessions) == 1 and "resume" not in run_status.render_text(status)


def test_signal_stop_is_stopped_not_failed(tmp_path):
    save = tmp_path / "PAI"
    write_pai_files(save, marker=False)
    write_events(save, [*FINISHED[:7], ev(12, "signal_received", signal="SIGTERM", phase="training"),
                        ev(12, "generation_failed", generation=2, duration_s=2.0, rank=0, exit="exit code 143"),
                        ev(12, "run_finished", exit_code=143, reason="stopped by SIGTERM")])
    status = run_status.gather(save)
    assert status.generations[-1].outcome == "stopped" and "SIGTERM" in status.generations[-1].detail
    assert (status.exit_code, status.failures) == (143, 0)


def test_torn_last_line_and_foreign_lines_are_skipped():
    text = "".join(json.dumps(e) + "\n" for e in FINISHED[:3]) + "not json\n[1]\n" + '{"time": "2026-12'
    events = parse_lines(text)
    assert [e["event"] for e in events] == ["run_started", "init_started", "init_exited"]
    assert history(events).init.ok


def test_refine_start_uses_whole_second_stamps_and_the_precise_duration():
    assert refine_start(100.0, 104.0, 3.5) == pytest.approx(100.75)  # the start lies in [100.5, 101)
    assert refine_start(None, 104.0, 3.0) == pytest.approx(101.5)
    assert refine_start(100.0, None, 3.0) == 100.0


# --- scores and dendrites --------------------------------------------------------------------------
def test_direction_is_inferred_from_best_arch_scores_without_a_config():
    s = scores(SCORES, "PAIScores.csv", arch_text=ARCH, first_switch=1)
    assert s.direction == "minimizing" and s.direction_how.startswith("inferred")
    rising = "Epochs,Validation Scores\n0,10\n1,40\n2,30\n3,35\n4,38\n"
    r = scores(rising, "PAIScores.csv")
    assert (r.direction, r.best, r.best_epoch) == ("maximizing", 40.0, 1) and r.direction_how.startswith("guessed")
    assert r.trend == "stalled"


def test_a_single_score_leaves_the_direction_unknown_and_the_text_says_so(tmp_path):
    s = scores("Epochs,Validation Scores\n0,0.5\n", "PAIScores.csv")
    assert (s.direction, s.best, s.last) == (None, None, 0.5) and "unknown" in s.direction_how
    save = tmp_path / "PAI"
    write_pai_files(save, config={})
    (save / "PAIScores.csv").write_text("Epochs,Validation Scores\n0,0.5\n")
    assert "direction unknown" in run_status.render_text(run_status.gather(save))


def test_dendrites_fall_back_from_param_counts_to_switch_epochs_to_switch_files():
    assert dendrites(PARAM_COUNTS, SWITCH_EPOCHS, [2, 4]).count == 2
    assert (dendrites(None, SWITCH_EPOCHS, [2]).count, dendrites(None, SWITCH_EPOCHS,
                                                                 [2]).source) == (2, "switch_epochs.csv")
    assert (dendrites(None, None, [2]).count, dendrites(None, None, [2]).source) == (1, "switch_2.pt")
    assert dendrites(None, None, []).count is None


# --- the supervisor check --------------------------------------------------------------------------
def test_flock_holders_reads_proc_locks():
    dev = os.makedev(0xFE, 0)
    text = "1: FLOCK  ADVISORY  WRITE 15005 fe:00:2146539 0 EOF\n2: FLOCK  ADVISORY  WRITE 7 fe:00:99 0 EOF\n" \
           "3: -> FLOCK  ADVISORY  WRITE 8 fe:00:2146539 0 EOF\n"
    assert flock_holders(text, dev, 2146539) == [15005]
    assert flock_holders(text, dev, 5) == []


def test_judge_trusts_a_live_holder_and_refuses_a_reused_pid():
    alive = {"alive": True, "cmdline": ["python", "-m", "pai_launch"], "create_time": 100.0}
    assert judge(0, "lock.node0", 5, 100.5, 5, alive, "h", True).running
    assert not judge(0, "lock.node0", 5, 100.5, None, None, "h", True).running
    reused = {**alive, "create_time": 500.0, "cmdline": ["vim"]}
    assert "reused" in judge(0, "lock.node0", 5, 100.5, None, reused, "h", False).how
    assert judge(0, "lock.node0", 5, 100.5, None, alive, "h", False).running  # no kernel probes: the PID decides


# --- main, --watch, the timeline -------------------------------------------------------------------
class Frames(io.StringIO):
    """An output that runs `after(frame_count)` after each frame (every write is one frame)."""

    def __init__(self, after) -> None:
        super().__init__()
        self.frames, self.after = 0, after

    def write(self, text: str) -> int:
        written = super().write(text)
        self.frames += 1
        self.after(self.frames)
        return written


def test_watch_redraws_until_the_run_ends_then_prints_a_final_frame(tmp_path):
    save = tmp_path / "PAI"
    write_pai_files(save, marker=False)
    now = time.time() - T0
    write_events(save, [ev(now - 5, "run_started", pid=os.getpid()), ev(now - 4, "generation_started", generation=1)])
    lock = SaveFolderLock(save)
    lock.acquire()

    def after(frames: int) -> None:
        if frames == 2:  # the run ends between the second and third frame
            write_events(save, [ev(now - 5, "run_started"), ev(now - 4, "generation_started", generation=1),
                                ev(now, "generation_ended", generation=1, complete=True, duration_s=4),
                                ev(now, "run_finished", exit_code=0, reason="training complete")])
            lock.release()

    out = Frames(after)
    try:
        assert run_status.main(save, as_json=True, watch=True, timeline=None, interval=0.01, out=out) == 0
    finally:
        lock.release()
    frames = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [f["state"] for f in frames] == ["running", "running", "finished"]


def test_watch_ends_with_0_on_ctrl_c(finished):
    def interrupt(frames: int) -> None:
        raise KeyboardInterrupt

    assert run_status.main(finished, as_json=False, watch=True, timeline=None, out=Frames(interrupt)) == 0


def test_timeline_is_a_png_and_the_score_follows_the_generations(finished, tmp_path):
    pytest.importorskip("matplotlib")
    status = run_status.gather(finished)
    kinds = [s.kind for s in spans(status)]
    assert kinds[0] == "init" and kinds.count("failed") == 1 and "complete" in kinds
    points = score_points(status)
    assert len(points) == 6 and [p[1] for p in points] == [1.25, 1.04, 0.79, 0.58, 0.43, 0.35]
    first, second, fourth = status.generations[0], status.generations[2], status.generations[3]
    assert all(first.started < t <= first.started + first.duration + 1e-6 for t, _ in points[:2])  # epochs 0-1: g1
    assert all(second.started < t <= second.started + second.duration + 1e-6 for t, _ in points[2:4])
    assert all(fourth.started < t for t, _ in points[4:])
    png = tmp_path / "run.png"
    assert run_status.main(finished, as_json=False, watch=False, timeline=png, out=io.StringIO()) == 0
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_timeline_without_matplotlib_is_one_line(finished, tmp_path, monkeypatch, capsys):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(StatusError, match="needs matplotlib"):
        run_status.draw_timeline(run_status.gather(finished), tmp_path / "x.png")
    assert run_status.main(finished, as_json=False, watch=False, timeline=tmp_path / "x.png", out=io.StringIO()) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "x.png").exists()


def test_timeline_into_a_missing_folder_is_one_line(finished, tmp_path):
    pytest.importorskip("matplotlib")
    with pytest.raises(StatusError, match="cannot write"):
        run_status.draw_timeline(run_status.gather(finished), tmp_path / "nowhere" / "x.png")


@pytest.mark.proc  # starts processes
def test_status_starts_without_torch_or_matplotlib():
    code = "import sys, pai_launch.status.gather; print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20,
                          env={**os.environ, "PYTHONPATH": str(REPO / "supervisor")})
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
