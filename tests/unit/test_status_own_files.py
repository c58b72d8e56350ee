"""`pai-launch status` on a save folder whose own files are not regular files: it never blocks on a pipe, and says
what it could not read."""

import os

import pytest

from pai_launch.status import gather as run_status

pytestmark = pytest.mark.timeout(30)


def test_status_notes_a_pipe_as_state_json_and_events_jsonl_without_blocking(tmp_path):
    save = tmp_path / "PAI"
    (save / ".pai-launch").mkdir(parents=True)
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    os.mkfifo(save / ".pai-launch" / "state.json")
    os.mkfifo(save / ".pai-launch" / "events.jsonl")
    status = run_status.gather(save)
    text = " ".join(status.notes)
    assert "cannot read state.json: is a named pipe (FIFO), not a regular file" in text
    assert "cannot read events.jsonl: is a named pipe (FIFO)" in text
