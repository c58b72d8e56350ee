"""pai-launch's own files in SAVE/.pai-launch opened defensively, end to end: a pipe, a huge file or a record of the
wrong shape is refused in one line (exit 2) and moved aside, never followed or trusted as a path; and switch files
that do not load are moved aside so the one before is resumed, within the failure budget."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from tests.helpers import safetensors_bytes
from tests.proc.launch_files import generations, make_resumable, quarantined, state_dir

pytestmark = pytest.mark.timeout(90)


def _one_error_line(launch) -> str:
    lines = [line for line in launch.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, launch.stderr
    assert lines[0].startswith("pai-launch: error: "), lines[0]
    return lines[0]


def _resumable_with_state(scene, write) -> object:
    save = make_resumable(scene.work / "PAI")
    state_dir(save).mkdir()
    write(state_dir(save) / "state.json")
    return save


def _moved_aside(save) -> list[str]:
    return sorted(name for name in os.listdir(state_dir(save)) if name.startswith("state.json.bad-"))


def test_a_pipe_as_state_json_is_refused_at_once_exit_2_and_moved_aside(scene):
    save = _resumable_with_state(scene, os.mkfifo)
    launch, rc = scene.run("--nproc", "2", timeout=30)

    assert rc == 2, launch.log_summary()
    line = _one_error_line(launch)
    assert "state.json is a named pipe (FIFO), not a regular file: moved aside to state.json.bad-" in line
    (aside,) = _moved_aside(save)
    assert stat.S_ISFIFO(os.lstat(state_dir(save) / aside).st_mode), "moved, never deleted"
    assert scene.records() == [], "nothing was started"


def test_a_pipe_as_events_jsonl_is_named_exit_2_and_nothing_is_started(scene):
    save = make_resumable(scene.work / "PAI")
    state_dir(save).mkdir()
    os.mkfifo(state_dir(save) / "events.jsonl")
    launch, rc = scene.run("--nproc", "2", timeout=30)

    assert rc == 2, launch.log_summary()
    line = _one_error_line(launch)
    assert "events.jsonl is a named pipe (FIFO), not a regular file" in line and "move it aside" in line
    assert "permissions" not in line
    assert scene.records() == []
    assert stat.S_ISFIFO(os.lstat(state_dir(save) / "events.jsonl").st_mode)


def test_a_directory_as_events_jsonl_is_named_as_one(scene):
    save = make_resumable(scene.work / "PAI")
    (state_dir(save) / "events.jsonl").mkdir(parents=True)
    launch, rc = scene.run("--nproc", "2", timeout=30)

    assert rc == 2, launch.log_summary()
    line = _one_error_line(launch)
    assert "events.jsonl is a directory, not a regular file" in line and "permissions" not in line


def test_a_state_json_with_fields_of_the_wrong_type_is_exit_2_one_line_and_moved_aside(scene):
    from pai_launch import __version__

    record = {"fingerprint": {"pai_launch": __version__}, "run_id": "R", "save_name": "PAI", "generation": "two",
              "failures": [], "init_done": "yes"}
    text = json.dumps(record)
    save = _resumable_with_state(scene, lambda path: path.write_text(text))
    launch, rc = scene.run("--nproc", "2", timeout=30)

    assert rc == 2, launch.log_summary()
    line = _one_error_line(launch)
    assert "'generation' is \"two\"" in line and "Traceback" not in launch.stderr
    (aside,) = _moved_aside(save)
    assert (state_dir(save) / aside).read_text() == text
    assert scene.records() == []


def test_a_huge_sparse_state_json_is_refused_without_being_read(scene):
    def sparse(path):
        with open(path, "wb") as handle:
            handle.truncate(1536 * 1024 * 1024)

    save = _resumable_with_state(scene, sparse)
    started = time.monotonic()
    launch, rc = scene.run("--nproc", "2", timeout=30)

    assert rc == 2, launch.log_summary()
    assert "1610612736 bytes, more than the 16777216 bytes it can be" in _one_error_line(launch)
    assert time.monotonic() - started < 20
    assert len(_moved_aside(save)) == 1


@pytest.mark.parametrize("name", ["../../../../tmp/pai-launch-escape-x", "../outside"])
def test_a_save_name_that_escapes_the_working_directory_is_refused_and_nothing_is_made_outside(scene, name):
    from pai_launch import __version__

    outside = (scene.work / name).resolve()
    before = os.path.lexists(outside)
    record = {"fingerprint": {"pai_launch": __version__}, "run_id": "R", "save_name": name}
    save = _resumable_with_state(scene, lambda path: path.write_text(json.dumps(record)))
    launch, rc = scene.run("--nproc", "2", timeout=30)

    assert rc == 2, launch.log_summary()
    assert "not a folder name inside the working directory" in _one_error_line(launch)
    assert os.path.lexists(outside) == before and not os.path.lexists(outside / ".pai-launch")
    assert len(_moved_aside(save)) == 1 and scene.records() == []


def test_state_json_follows_the_umask(scene):
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"],
                           prefix=("sh", "-c", 'umask 027 && exec "$0" "$@"'))

    assert rc == 0, launch.log_summary()
    assert stat.S_IMODE(os.stat(state_dir(scene.work / "PAI") / "state.json").st_mode) == 0o640


def test_a_text_file_as_the_newest_switch_file_is_quarantined_and_the_one_before_is_loaded(scene):
    text = b"this is not a checkpoint, just a text file\n"
    save = make_resumable(scene.work / "PAI", {2: safetensors_bytes(os.urandom(64)), 4: text})
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "2"])

    assert rc == 0, launch.log_summary()
    event = launch.event("checkpoint_quarantined")
    assert event["file"] == "switch_4.pt" and "not a checkpoint" in event["problem"]
    assert list(quarantined(save).values()) == [text]
    assert generations(launch) == [(1, "PAI"), (2, "PAI")]
    assert "generation_failed" not in launch.event_names()


def test_a_whole_switch_file_that_no_rank_can_load_is_moved_aside_and_the_one_before_is_resumed(scene):
    unloadable = safetensors_bytes(os.urandom(64), {"__metadata__": {"unloadable": "yes"}})
    save = make_resumable(scene.work / "PAI", {2: safetensors_bytes(os.urandom(64)), 4: unloadable})
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.1", script_args=["--generations", "3"])

    assert rc == 0, launch.log_summary()
    failed = launch.event("generation_failed")
    assert failed["generation"] == 1 and sorted(failed["failed_ranks"]) == [0, 1]
    retry = launch.event("retry_scheduled")
    assert "switch_4.pt cannot be loaded (rank" in retry["reason"] \
        and "Error(s) in loading state_dict" in retry["reason"]
    assert "it is moved aside" in retry["reason"]
    moved = launch.event("checkpoint_quarantined")
    assert moved["file"] == "switch_4.pt" and "generation 1 could not load it" in moved["problem"]
    assert list(quarantined(save).values()) == [unloadable]
    assert generations(launch) == [(1, "PAI"), (2, "PAI"), (3, "PAI")]
    gen2 = [r for r in scene.records() if r["env"]["PAI_LAUNCH_GENERATION"] == "2"]
    assert len(gen2) == 2 and all(r["load_folder"] == "PAI" for r in gen2)


def test_a_script_whose_every_switch_file_is_garbage_ends_with_exit_4(scene):
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.1", "--max-failures", "3",
                           script_args=["--garbage-switch", "--generations", "20"], timeout=80)

    assert rc == 4, launch.log_summary()
    finished = launch.event("run_finished")
    assert "gave up after 3 consecutive failed generation(s)" in finished["reason"]
    assert "wrote no usable switch file" in finished["reason"] and "not a checkpoint" in finished["reason"]
    assert [g for g, _ in generations(launch)] == [1, 2, 3]
    assert len(quarantined(scene.work / "PAI")) == 2, "each earlier generation's file was moved aside, never deleted"


def _folder_with_events_pipe(scene):
    """A save folder without init outputs (an init run comes first) whose events.jsonl is a named pipe."""
    save = scene.work / "PAI"
    state_dir(save).mkdir(parents=True)
    os.mkfifo(state_dir(save) / "events.jsonl")
    return save


def test_a_pipe_as_events_jsonl_found_after_the_init_run_ends_the_run_naming_it(scene):
    save = _folder_with_events_pipe(scene)
    launch, rc = scene.run("--nproc", "2", timeout=60)

    assert rc == 6, launch.log_summary()
    reason = launch.event("run_finished")["reason"]
    assert "events.jsonl is a named pipe (FIFO), not a regular file" in reason and "move it aside" in reason
    assert [r for r in scene.records() if not r["init"]] == [], "no generation was started"
    assert stat.S_ISFIFO(os.lstat(state_dir(save) / "events.jsonl").st_mode)


def test_sigterm_still_stops_a_run_whose_events_jsonl_is_a_pipe(scene):
    import signal

    _folder_with_events_pipe(scene)
    launch = scene.start("--nproc", "2", script_args=["--hang-init"])
    scene.wait_ready(0, 1)
    sent = launch.send(signal.SIGTERM)
    rc = launch.wait(30)

    assert rc == 143, launch.log_summary()
    assert launch.ended - sent < 20


def test_a_script_whose_every_switch_file_no_rank_can_load_ends_with_exit_4(scene):
    launch, rc = scene.run("--nproc", "2", "--backoff", "0.1", "--max-failures", "3",
                           script_args=["--unloadable-switch", "--generations", "20"], timeout=80)

    assert rc == 4, launch.log_summary()
    reason = launch.event("run_finished")["reason"]
    assert "3 switch file(s) the script wrote could not be loaded" in reason, reason
    assert "switch_10.pt cannot be loaded" in reason
    # Odd generations start over and write a switch file (progress, never revoked); even ones cannot load it.
    assert generations(launch) == [(1, None), (2, "PAI"), (3, None), (4, "PAI"), (5, None), (6, "PAI")]
    assert [e["file"] for e in launch.events("checkpoint_quarantined")] == ["switch_2.pt", "switch_6.pt"]