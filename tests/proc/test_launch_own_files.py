"""pai-launch's own files in SAVE/.pai-launch opened defensively, end to end: a pipe, a huge file or a record of the
wrong shape is refused in one line (exit 2) and moved aside, never followed or trusted as a path. (Switch files that
do not load, moved aside so the one before is resumed within the failure budget, are played as histories in
tests/unit/test_histories_own_files.py.)"""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.proc.launch_files import make_resumable, state_dir

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


def _folder_with_events_pipe(scene):
    """A save folder without init outputs (an init run comes first) whose events.jsonl is a named pipe."""
    save = scene.work / "PAI"
    state_dir(save).mkdir(parents=True)
    os.mkfifo(state_dir(save) / "events.jsonl")
    return save


def test_sigterm_still_stops_a_run_whose_events_jsonl_is_a_pipe(scene):
    import signal

    _folder_with_events_pipe(scene)
    launch = scene.start("--nproc", "2", script_args=["--hang-init"])
    scene.wait_ready(0, 1)
    sent = launch.send(signal.SIGTERM)
    rc = launch.wait(30)

    assert rc == 143, launch.log_summary()
    assert launch.ended - sent < 20
