"""The save folder going wrong, over whole histories in this process: removed mid-run or while a retry waits (exit 6,
the workers asked to stop, nothing else touched), cleared or replaced by the init run (taken after it), removed and
made again by a worker (exit 6, named). (A full disk, an unwritable folder and a second pai-launch, with processes:
tests/proc/test_launch_save_faults.py.)"""

from __future__ import annotations

import os

import pytest

from pai_launch.core import exitcodes
from pai_launch.status import gather
from tests.helpers import json_events, tree_state
from tests.scripted_world import Gen, complete, play


def console(capfd) -> dict[str, dict]:
    """The run's console events by name (the last of each): where the save folder that held its events is gone."""
    return {event["event"]: event for event in json_events(capfd.readouterr().err)}


def test_the_save_folder_removed_mid_run_stops_the_workers_and_exits_6_deleting_nothing_else(tmp_path, capfd):
    (tmp_path / "notes.txt").write_text("the user's")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.bin").write_bytes(os.urandom(256))
    others = tree_state(tmp_path / "data")

    played = play(tmp_path, [Gen(hangs=True, save_folder="removed")], grace=10.0)

    assert played.exit_code == exitcodes.SAVE_FOLDER
    events = console(capfd)
    assert "removed" in events["save_folder_failed"]["reason"]
    assert events["run_finished"]["reason"] == events["save_folder_failed"]["reason"]
    # The workers were asked to stop and obeyed; nothing was killed.
    assert events["signal_forwarded"]["signal"] == "SIGTERM" and len(events["signal_forwarded"]["pids"]) == 2
    assert sorted((rank, name) for _, rank, name, _ in played.processes.signals) == [(0, "SIGTERM"), (1, "SIGTERM")]
    assert "run_killed" not in events
    # Nothing else touched, and the removed folder was not made again for pai-launch's own state.
    assert sorted(os.listdir(tmp_path)) == ["data", "notes.txt"]
    assert tree_state(tmp_path / "data") == others and (tmp_path / "notes.txt").read_text() == "the user's"


def test_the_save_folder_removed_while_a_retry_waits_exits_6_without_launching_again(tmp_path, capfd):
    failed = Gen(writes=(("latest.pt", b"epoch"),), failures=((0, 3, "rank 0 failing on purpose with 3"),),
                 then_removed=True)
    played = play(tmp_path, [failed], backoff=600.0, backoff_max=600.0)

    assert played.exit_code == exitcodes.SAVE_FOLDER
    assert "removed" in console(capfd)["save_folder_failed"]["reason"]
    assert len(played.processes.requests) == 1  # the 600 s backoff was not waited out, nor anything started
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("existing", [False, True], ids=["new_folder", "existing_folder"])
def test_a_script_that_clears_its_save_folder_in_the_init_run_completes_with_save_name(tmp_path, existing):
    save = tmp_path / "PAI"
    if existing:  # an earlier attempt's init output: the init run runs again, and removes it first
        save.mkdir()
        (save / "array_dims.csv").write_text(".fc1,1,32\n")

    played = play(tmp_path, [complete()], nproc=1, init_folder="cleared", adopt_save_folder=False)

    assert played.exit_code == 0, played.names()
    assert played.processes.inits == 1 and (save / ".training_complete").is_file()
    names = played.names()
    assert names[0] == "run_started" and names[-1] == "run_finished" and "init_exited" in names
    assert played.state()["last_exit"]["code"] == 0
    assert gather.gather(save).exit_code == 0


def test_a_save_folder_the_init_run_replaces_is_taken_after_it_and_the_old_one_is_left_alone(tmp_path):
    played = play(tmp_path, [complete()], init_folder="replaced")

    assert played.exit_code == 0, played.names()
    assert sorted(os.listdir(tmp_path / "PAI.replaced")) == ["array_dims.csv"]  # nothing of ours in the old one
    assert played.state()["last_exit"]["code"] == 0


def test_a_worker_that_removes_the_save_folder_exits_6_naming_it_and_status_says_it_exited(tmp_path):
    played = play(tmp_path, [Gen(hangs=True, save_folder="remade")], grace=10.0)

    assert played.exit_code == exitcodes.SAVE_FOLDER
    reason = played.event("save_folder_failed")["reason"]
    assert reason.startswith(f"the save folder {tmp_path / 'PAI'} was removed while generation 1 was running (a new "
                             "folder of that name has taken its place): if the script deletes its save folder"), reason
    assert played.event("run_finished")["reason"] == reason
    # The script made the folder again; the run's history and its end went into it, so status reads how it ended.
    status = gather.gather(tmp_path / "PAI")
    assert (status.state, status.exit_code) == ("finished", 6)
    text = gather.render_text(status)
    assert "finished: exit code 6" in text and "still going" not in text, text
