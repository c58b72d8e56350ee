"""pai-launch's own state in SAVE/.pai-launch/ end to end: state.json (atomic, resumable), events.jsonl, the
node lock, a restart on the same folder (also after kill -9), another command on it (exit 2, --fresh), and a
completed folder that nothing may be written to."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import psutil
import pytest

from tests.helpers import FAKE_TRAINER, assert_all_gone, tree_state
from tests.proc.launch_files import generations, make_resumable, read_events_file, read_state, state_dir

pytestmark = pytest.mark.timeout(90)

TRAINING = ["--heartbeat", "0.1", "--train-seconds", "0.3"]


def _run_ids(scene) -> set[str]:
    return {r["env"]["PAI_LAUNCH_RUN_ID"] for r in scene.records()}


class _StateReader(threading.Thread):
    """Reads state.json as fast as it can while a run goes on; remembers every parse and every failure."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.seen: list[dict] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.002):
            try:
                text = self.path.read_text()
            except FileNotFoundError:
                continue
            try:
                self.seen.append(json.loads(text))
            except ValueError as exc:
                self.errors.append(f"{exc}: {text[:200]!r}")


def test_state_json_and_events_jsonl_record_the_run_and_state_json_is_always_whole(scene):
    from pai_launch import __version__

    script_args = ["--fail-rank", "0", "--fail-generation", "1", "--generations", "3", *TRAINING]
    save = scene.work / "PAI"
    reader = _StateReader(save / ".pai-launch" / "state.json")
    reader.start()
    try:
        launch, rc = scene.run("--nproc", "2", "--backoff", "0.5", script_args=script_args)
    finally:
        reader.stop.set()
        reader.join(5)

    assert rc == 0, launch.log_summary()
    # Read hundreds of times while it was rewritten at every step: never half a file.
    assert reader.errors == [] and len(reader.seen) > 100, (reader.errors[:3], len(reader.seen))
    observed = [(s["generation"], s["failures"]) for s in reader.seen]
    assert [g for g, _ in observed] == sorted(g for g, _ in observed), "the generation never goes back"
    assert (1, 1) in observed or (2, 1) in observed, "the failure was recorded while the retry was pending"

    state = read_state(save)
    finished = launch.event("run_finished")
    assert state["fingerprint"] == {"script": str(FAKE_TRAINER.resolve()), "script_args": scene.instrumentation
                                    + script_args,
                                    "nproc": 2, "pai_launch": __version__}
    assert state["run_id"] == finished["run_id"] and _run_ids(scene) == {state["run_id"]}
    assert (state["generation"], state["failures"], state["init_done"], state["save_name"]) == (3, 0, True, "PAI")
    assert state["last_switch"] == "switch_4.pt"
    assert state["last_exit"] == {"code": 0, "reason": "training complete"}
    assert sorted(os.listdir(state_dir(save))) == ["events.jsonl", "lock.node0",
                                                   "state.json"], "no temporary files left"

    # events.jsonl holds exactly the events pai-launch logged on stderr (its own clock field instead of timestamp).
    logged = launch.events()
    recorded = read_events_file(save)
    assert [e["event"] for e in recorded] == [e["event"] for e in logged]
    for on_stderr, in_file in zip(logged, recorded):
        assert {k: v for k, v in on_stderr.items() if k != "timestamp"} == {k: v for k, v in in_file.items() if k
                                                                            != "time"}
    assert {"run_started", "generation_failed", "retry_scheduled", "run_finished"} <= {e["event"] for e in recorded}


def test_kill_9_mid_generation_then_a_restart_continues_the_generation_and_run_id_with_a_new_budget(scene, tmp_path):
    # Generation 1 fails (failures 1), generation 2 hangs and pai-launch is killed with -9. The restart must not
    # rerun the init run and must start generation 3 with the same run id; it is a new invocation with a full budget
    # (state.json's history keeps the first one's count): with --max-failures 2, generation 3's failure is retried.
    pai_args = ["--nproc", "2", "--max-failures", "2", "--backoff", "0.2", "--grace", "5"]
    script_args = ["--fail-rank", "0", "--fail-generation", "1,3", "--hang-generation", "2", "--generations", "4",
                   *TRAINING]
    first = scene.start(*pai_args, script_args=script_args)
    scene.wait_ready(2, 2)
    save = scene.work / "PAI"
    before = read_state(save)
    assert (before["generation"], before["failures"], before["init_done"]) == (2, 1, True)
    assert (state_dir(save) / "lock.node0").read_text().strip() == str(first.pid)
    run = psutil.Process(first.pid).children(recursive=True)

    first.popen.send_signal(signal.SIGKILL)
    assert first.wait(10) == -signal.SIGKILL
    assert_all_gone(run, within=3, what="processes of the killed run")
    assert read_state(save) == before, "state.json is whole and unchanged after kill -9"

    second = scene.start(*pai_args, script_args=script_args)
    rc = second.wait(60)

    assert rc == 0, second.log_summary()
    started = second.event("run_started")
    assert (started["resumed"], started["generation"], started["failures"]) == (True, 2, 0)
    assert "init_started" not in second.event_names()
    assert generations(second) == [(3, None), (4, None)]
    assert [r["failures"] for r in second.events("retry_scheduled")] == [1]
    assert "training complete" in second.event("run_finished")["reason"]
    assert _run_ids(scene) == {before["run_id"]} and second.event("run_finished")["run_id"] == before["run_id"]
    assert [r["env"]["PAI_LAUNCH_GENERATION"] for r in scene.records()] == ["0", "1", "1", "2", "2", "3", "3", "4", "4"]
    after = read_state(save)
    assert (after["generation"], after["failures"], after["last_exit"]["code"],
            after["run_id"]) == (4, 1, 0, before["run_id"])
    assert [(h["generation"], h["failures"]) for h in after["history"]] == [(2, 1)]
    # The dead pai-launch's lock was taken over; its private log folder was cleaned up by the restart.
    assert (state_dir(save) / "lock.node0").read_text().strip() == str(second.pid)
    assert scene.tmp_listing() == []
    # Both runs' events, in order, in one events.jsonl.
    assert [e["event"] for e in read_events_file(save)].count("run_started") == 2


@pytest.mark.parametrize("change", ["script_args", "nproc"])
def test_another_command_on_the_save_folder_exits_2_mentioning_fresh_and_changes_nothing(scene, change):
    first, rc = scene.run("--nproc", "2", script_args=["--no-progress"])
    assert rc == 5, first.log_summary()
    before = tree_state(scene.work)

    pai_args, script_args = (["--nproc", "2"], ["--no-progress", "--generations", "2"]) if change == "script_args" \
        else (["--nproc", "1"], ["--no-progress"])
    second, rc = scene.run(*pai_args, script_args=script_args, timeout=30)

    assert rc == 2, second.stderr
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pai-launch: error:"), lines
    assert "--fresh" in lines[0] and change in lines[0], lines[0]
    assert tree_state(scene.work) == before
    assert len(scene.records()) == 3, "nothing was started"


def test_a_second_pai_launch_on_the_same_save_folder_exits_2_naming_the_first_even_with_fresh(scene):
    script_args = ["--generations", "1", "--hold-until", str(scene.hold_file)]
    first = scene.start("--nproc", "2", script_args=script_args)
    scene.wait_ready(1, 2)
    save = scene.work / "PAI"
    events_before = read_events_file(save)

    for extra in ([], ["--fresh"]):  # --fresh must not move the folder from under a running pai-launch either
        second, rc = scene.run("--nproc", "2", *extra, script_args=script_args, timeout=30)

        assert rc == 2, second.stderr
        assert f"PID {first.pid}" in second.stderr and "another pai-launch" in second.stderr, second.stderr
        assert second.stdout == ""
        assert os.listdir(scene.work) == ["PAI"], extra
        assert read_events_file(save) == events_before, "the second pai-launch logged nothing into the first's folder"
        assert (state_dir(save) / "lock.node0").read_text().strip() == str(first.pid)
        assert first.popen.poll() is None, "the first pai-launch is unaffected"

    scene.hold_file.touch()
    assert first.wait(60) == 0, first.log_summary()
    assert "signal_received" not in first.event_names() and "save_folder_failed" not in first.event_names()
    assert len(scene.records()) == 3, "the others started nothing"
    assert read_state(save)["run_id"] == first.event("run_finished")["run_id"]


def test_a_lock_file_left_by_a_dead_process_is_taken_over(scene):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    save = make_resumable(scene.work / "PAI")
    state_dir(save).mkdir()
    (state_dir(save) / "lock.node0").write_text(f"{dead.pid}\n")

    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"])

    assert rc == 0, launch.log_summary()
    assert (state_dir(save) / "lock.node0").read_text().strip() == str(launch.pid)
    assert generations(launch) == [(1, "PAI")]
