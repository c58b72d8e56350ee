"""Checkpoint integrity end to end, with real processes: a torn switch file a generation leaves is moved (never
deleted) into SAVE/.pai-launch/quarantine/ before the next launch, and the one before is loaded. The other cases (a
torn file found on resume, in four shapes; none valid left; the first generation's torn) are played as histories in
tests/unit/test_histories_checkpoints.py.

The fake trainer fails like the real library when it is asked to load a torn newest switch file (exit 1,
"SafetensorError"), so a run that completes without that error shows the quarantine happened in time."""

from __future__ import annotations

import os
import re

import pytest

from tests.proc.launch_files import generations, quarantined

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
