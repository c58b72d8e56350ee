"""Checkpoint integrity end to end: before each launch the newest switch_*.pt must be a whole safetensors file;
a torn or empty one is moved (never deleted) into SAVE/.pai-launch/quarantine/ and the one before becomes the
newest; with none left the run resumes from scratch, without --pai_load_folder.

The fake trainer fails like the real library when it is asked to load a torn newest switch file (exit 1,
"SafetensorError"), so a run that completes without that error shows the quarantine happened in time."""

from __future__ import annotations

import io
import os
import re
import zipfile

import pytest

from tests.helpers import safetensors_bytes
from tests.proc.launch_files import generations, make_resumable, quarantined

pytestmark = pytest.mark.timeout(90)

QUARANTINE_NAME = re.compile(r"^(switch_\d+\.pt)\.\d{8}-\d{6}(\.\d+)?$")


def _by_original_name(save) -> dict[str, bytes]:
    found = {}
    for name, content in quarantined(save).items():
        match = QUARANTINE_NAME.match(name)
        assert match, name
        found[match.group(1)] = content
    return found


def _no_load_error(launch, torn_by: int | None = None) -> None:
    """No rank failed to load; `torn_by`: the generation that left a torn switch file, failed for that alone (its
    file is no progress: it counts against the failure budget)."""
    assert "SafetensorError" not in launch.stdout + launch.stderr
    failed = launch.events("generation_failed")
    expected = [] if torn_by is None else [torn_by]
    assert [e["generation"] for e in failed] == expected, launch.log_summary()
    assert all("wrote no usable switch file" in e["error"] for e in failed)


def test_a_torn_switch_file_left_by_a_generation_is_quarantined_and_the_one_before_is_loaded(scene):
    # Generation 2 leaves a torn switch_4.pt: generation 3 must resume from switch_2.pt.
    launch, rc = scene.run("--nproc", "2", script_args=["--torn-switch-generation", "2", "--generations", "4"])

    assert rc == 0, launch.log_summary()
    _no_load_error(launch, torn_by=2)
    assert launch.event("retry_scheduled")["failures"] == 1
    save = scene.work / "PAI"
    event = launch.event("checkpoint_quarantined")
    assert event["file"] == "switch_4.pt" and event["problem"]
    names = launch.event_names()
    third = [i for i, e in enumerate(launch.events()) if e["event"] == "generation_started" and e["generation"] == 3][0]
    assert names.index("checkpoint_quarantined") < third, "quarantined before generation 3 was launched"
    moved = os.path.relpath(event["moved_to"], save)
    assert os.path.dirname(moved) == os.path.join(".pai-launch", "quarantine")
    torn = (scene.record_dir / "torn-switch_4.pt").read_bytes()
    assert (save / moved).read_bytes() == torn, "the quarantined file is exactly what was torn"
    assert _by_original_name(save) == {"switch_4.pt": torn}
    assert not (save / "switch_4.pt").exists()
    assert (save / "switch_2.pt").is_file() and (save / "switch_6.pt").is_file()
    assert generations(launch) == [(1, None), (2, "PAI"), (3, "PAI"), (4, "PAI")]
    assert "resuming_from_scratch" not in names


def _torch_zip() -> bytes:
    """The shape of a torch.save file: a zip archive (its central directory at the end)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", os.urandom(512))
        archive.writestr("archive/version", "3\n")
    return buffer.getvalue()


@pytest.mark.parametrize("damage", ["truncated", "empty", "header_only", "torch_zip_truncated"])
def test_a_torn_newest_switch_file_found_on_resume_is_quarantined_byte_for_byte(scene, damage):
    whole = safetensors_bytes(os.urandom(64))
    newest = safetensors_bytes(os.urandom(64))
    torn = {"truncated": newest[: len(newest) - 10], "empty": b"", "header_only": newest[: len(newest) - 64],
            "torch_zip_truncated": _torch_zip()[:400]}[damage]
    save = make_resumable(scene.work / "PAI", {2: whole, 4: torn})
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "2"])

    assert rc == 0, launch.log_summary()
    _no_load_error(launch)
    assert "init_started" not in launch.event_names()
    assert launch.event("checkpoint_quarantined")["file"] == "switch_4.pt"
    assert _by_original_name(save) == {"switch_4.pt": torn}
    assert generations(launch) == [(1, "PAI"), (2, "PAI")]
    assert [r["load_folder"] for r in scene.records()] == ["PAI"] * 4
    assert (save / ".training_complete").is_file() and not (save / "switch_4.pt").exists()


def test_with_no_valid_switch_file_left_the_run_resumes_from_scratch_without_pai_load_folder(scene):
    good = safetensors_bytes(os.urandom(64))
    torn_2, empty_4 = good[:20], b""
    save = make_resumable(scene.work / "PAI", {2: torn_2, 4: empty_4})
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "2"])

    assert rc == 0, launch.log_summary()
    _no_load_error(launch)
    assert [e["file"] for e in launch.events("checkpoint_quarantined")] == ["switch_4.pt", "switch_2.pt"]
    assert "no valid switch" in launch.event("resuming_from_scratch")["reason"]
    assert _by_original_name(save) == {"switch_2.pt": torn_2, "switch_4.pt": empty_4}
    # array_dims.csv is there: no init run, generation 1 starts from scratch, generation 2 loads its switch_2.pt.
    assert "init_started" not in launch.event_names()
    assert generations(launch) == [(1, None), (2, "PAI")]
    first = [r for r in scene.records() if r["env"]["PAI_LAUNCH_GENERATION"] == "1"]
    assert len(first) == 2 and all("--pai_load_folder" not in r["argv"] and r["load_folder"] is None for r in first)


def test_a_torn_switch_file_from_the_first_generation_leaves_nothing_valid_and_the_next_starts_from_scratch(scene):
    launch, rc = scene.run("--nproc", "2", script_args=["--torn-switch-generation", "1", "--generations", "3"])

    assert rc == 0, launch.log_summary()
    _no_load_error(launch, torn_by=1)
    save = scene.work / "PAI"
    assert _by_original_name(save) == {"switch_2.pt": (scene.record_dir / "torn-switch_2.pt").read_bytes()}
    assert launch.event("resuming_from_scratch")
    assert generations(launch) == [(1, None), (2, None), (3, "PAI")]
    assert sorted(p.name for p in save.glob("switch_*.pt")) == ["switch_4.pt"]
