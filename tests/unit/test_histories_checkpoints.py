"""Checkpoint integrity over whole histories, in this process: before each start the newest switch_*.pt must be whole;
a torn or empty one is moved (never deleted) into SAVE/.pai-launch/quarantine/ and the one before becomes the newest;
with none left the run resumes from scratch, without --pai_load_folder. The scripted agent fails every rank, as the
library does, when the newest file of the folder it resumes from cannot be loaded: a run that completes without such
a failure shows the quarantine came in time. (A torn file left by a generation, end to end with processes:
tests/proc/test_launch_checkpoints.py.)"""

from __future__ import annotations

import io
import os
import re
import zipfile

import pytest

from tests.helpers import safetensors_bytes
from tests.scripted_world import Gen, complete, play, switch, torn

QUARANTINE_NAME = re.compile(r"^(switch_\d+\.pt)\.\d{8}-\d{6}(\.\d+)?$")


def resumable(save, switches: dict[int, bytes]) -> None:
    """A save folder as the init run and earlier generations leave it: array_dims.csv and switch files."""
    save.mkdir(parents=True, exist_ok=True)
    (save / "array_dims.csv").write_text(".fc1,1,32\n")
    for number, content in switches.items():
        (save / f"switch_{number}.pt").write_bytes(content)


def quarantined(save) -> dict[str, bytes]:
    """Original switch file name -> the bytes moved aside for it."""
    folder = save / ".pai-launch" / "quarantine"
    found = {}
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        match = QUARANTINE_NAME.match(path.name)
        assert match, path.name
        found[match.group(1)] = path.read_bytes()
    return found


def no_load_error(played, torn_by: int | None = None) -> None:
    """No rank failed to load; `torn_by`: the generation that left a torn switch file, failed for that alone."""
    failed = played.all("generation_failed")
    assert [e["generation"] for e in failed] == ([] if torn_by is None else [torn_by]), played.names()
    assert all("wrote no usable switch file" in e["error"] for e in failed)


def torch_zip() -> bytes:
    """The shape of a torch.save file: a zip archive (its central directory at the end)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", os.urandom(512))
        archive.writestr("archive/version", "3\n")
    return buffer.getvalue()


def test_a_torn_switch_file_left_by_a_generation_is_quarantined_before_the_next_start_and_the_one_before_loaded(
        tmp_path):
    played = play(tmp_path, [switch(2), Gen(writes=(("switch_4.pt", torn()),)), switch(4), complete()])

    assert played.exit_code == 0, played.names()
    no_load_error(played, torn_by=2)
    names = played.names()
    third = next(i for i, e in enumerate(played.events) if e["event"] == "generation_started" and e["generation"] == 3)
    assert names.index("checkpoint_quarantined") < third
    assert list(quarantined(tmp_path / "PAI")) == ["switch_4.pt"]
    assert played.processes.load_folders() == [None, "PAI", "PAI", "PAI"]
    assert "resuming_from_scratch" not in names


@pytest.mark.parametrize("damage", ["truncated", "empty", "header_only", "torch_zip_truncated"])
def test_a_torn_newest_switch_file_found_on_resume_is_quarantined_byte_for_byte(tmp_path, damage):
    newest = safetensors_bytes(os.urandom(64))
    damaged = {"truncated": newest[: len(newest) - 10], "empty": b"", "header_only": newest[: len(newest) - 64],
               "torch_zip_truncated": torch_zip()[:400]}[damage]
    resumable(tmp_path / "PAI", {2: safetensors_bytes(os.urandom(64)), 4: damaged})

    played = play(tmp_path, [switch(4), complete()])

    assert played.exit_code == 0, played.names()
    no_load_error(played)
    assert played.processes.inits == 0
    assert played.event("checkpoint_quarantined")["file"] == "switch_4.pt"
    assert quarantined(tmp_path / "PAI") == {"switch_4.pt": damaged}
    assert played.processes.load_folders() == ["PAI", "PAI"]


def test_a_whole_torch_zip_switch_file_is_loaded_not_quarantined(tmp_path):
    resumable(tmp_path / "PAI", {2: torch_zip()})

    played = play(tmp_path, [complete()])

    assert played.exit_code == 0, played.names()
    assert "checkpoint_quarantined" not in played.names()
    assert played.processes.load_folders() == ["PAI"]


def test_with_no_valid_switch_file_left_the_run_resumes_from_scratch_without_pai_load_folder(tmp_path):
    torn_2, empty_4 = safetensors_bytes(os.urandom(64))[:20], b""
    resumable(tmp_path / "PAI", {2: torn_2, 4: empty_4})

    played = play(tmp_path, [switch(2), complete()])

    assert played.exit_code == 0, played.names()
    no_load_error(played)
    assert [e["file"] for e in played.all("checkpoint_quarantined")] == ["switch_4.pt", "switch_2.pt"]
    assert "no valid switch" in played.event("resuming_from_scratch")["reason"]
    assert quarantined(tmp_path / "PAI") == {"switch_2.pt": torn_2, "switch_4.pt": empty_4}
    # array_dims.csv is there: no init run; generation 1 starts from scratch, generation 2 loads its switch_2.pt.
    assert played.processes.inits == 0
    assert played.processes.load_folders() == [None, "PAI"]


def test_a_torn_switch_file_from_the_first_generation_leaves_nothing_valid_and_the_next_starts_from_scratch(tmp_path):
    played = play(tmp_path, [Gen(writes=(("switch_2.pt", torn()),)), switch(2), switch(4), complete()])

    assert played.exit_code == 0, played.names()
    no_load_error(played, torn_by=1)
    assert list(quarantined(tmp_path / "PAI")) == ["switch_2.pt"]
    assert played.event("resuming_from_scratch")
    assert played.processes.load_folders() == [None, None, "PAI", "PAI"]
