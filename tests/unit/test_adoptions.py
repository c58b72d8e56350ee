"""The record of adopted save folders (adoptions.py): found for the same command only, replaced, refused when torn."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from pai_launch.placement.spec import LaunchSpec
from pai_launch.savefmt import adoptions
from pai_launch.savefmt.record import StateError
from pai_launch.status import gather
from pai_launch.supervise.folder.savefolder import resolve_adoption
from tests.helpers import FAKE_TRAINER


def _spec(workdir: Path, *args: str, **changes) -> LaunchSpec:
    return LaunchSpec(script=FAKE_TRAINER, workdir=workdir, python=sys.executable, nproc=2, script_args=args, **changes)


def _remember(spec: LaunchSpec, folder: str, run_id: str = "run-1") -> None:
    adoptions.remember(spec.workdir, spec.adoption(folder, run_id))


def test_a_remembered_adoption_is_found_for_the_same_command_only(tmp_path):
    spec = _spec(tmp_path, "--save-dir", "out/a")
    _remember(spec, "out/a")

    assert adoptions.find(tmp_path, spec.adoption(spec.save_name)).save_name == "out/a"
    assert adoptions.find(tmp_path, _spec(tmp_path, "--save-dir", "out/b").adoption("PAI")) is None
    assert adoptions.find(tmp_path, dataclasses.replace(spec, save_name="OTHER").adoption("OTHER")) is None
    assert adoptions.find(tmp_path / "elsewhere", spec.adoption(spec.save_name)) is None


def test_remembering_again_replaces_the_commands_entry_and_keeps_the_others(tmp_path):
    first, second = _spec(tmp_path, "--save-dir", "a"), _spec(tmp_path, "--save-dir", "b")
    _remember(first, "a")
    _remember(second, "b")
    _remember(first, "a2", run_id="run-2")

    found = adoptions.load(tmp_path)
    assert [(a.save_name, a.run_id) for a in found] == [("b", "run-1"), ("a2", "run-2")]
    assert adoptions.newest(tmp_path).save_name == "a2"
    data = json.loads(adoptions.record_path(tmp_path).read_text())
    assert data["format"] == 1 and all(entry["updated"] for entry in data["adopted"])
    assert sorted(os.listdir(tmp_path)) == [adoptions.RECORD_NAME]  # no temp file left beside it


@pytest.mark.parametrize("text", ["", '{"format": 1, "adop', '{"format": 1}', '[1, 2]', '{"adopted": [{"script": 1}]}'])
def test_a_torn_or_foreign_record_is_refused_naming_it_and_is_kept(tmp_path, text):
    path = adoptions.record_path(tmp_path)
    path.write_text(text)

    with pytest.raises(adoptions.AdoptionRecordError) as raised:
        adoptions.find(tmp_path, _spec(tmp_path).adoption("PAI"))
    assert str(path) in str(raised.value) and "--save-name" in str(raised.value)
    assert isinstance(raised.value, StateError)  # exit 2 at the launch boundary, nothing started
    assert path.read_text() == text  # never deleted or rewritten


def test_resolve_uses_the_adopted_folder_unless_save_name_was_given(tmp_path):
    spec = _spec(tmp_path, "--save-dir", "out/a")
    _remember(spec, "out/a")
    (tmp_path / "out" / "a").mkdir(parents=True)

    resolved, adopted = resolve_adoption(spec)
    assert (resolved.save_name, resolved.save_dir, adopted.save_name) == ("out/a", tmp_path / "out" / "a", "out/a")
    given = dataclasses.replace(spec, adopt_save_folder=False)
    assert resolve_adoption(given) == (given, None)


def test_a_folder_adopted_again_by_a_resumed_command_replaces_its_entry(tmp_path):
    spec = _spec(tmp_path, "--save-dir", "out/a")
    _remember(spec, "out/a")
    (tmp_path / "out" / "a").mkdir(parents=True)
    resolved, _ = resolve_adoption(spec)
    _remember(resolved, "out/b")  # a --reinit whose script now writes elsewhere

    assert [(a.instead_of, a.save_name) for a in adoptions.load(tmp_path)] == [("PAI", "out/b")]


def test_resolve_refuses_an_adopted_folder_that_is_gone_unless_fresh(tmp_path):
    spec = _spec(tmp_path, "--save-dir", "out/a")
    _remember(spec, "out/a")

    with pytest.raises(StateError, match=r"adopted the folder out/a for this command .* not there: restore it .* "
                       r"--fresh"):
        resolve_adoption(spec)
    resolved, _ = resolve_adoption(dataclasses.replace(spec, fresh=True))
    assert resolved.save_name == "out/a"


def test_status_without_an_argument_reads_the_adopted_folder_where_the_script_wrote_nothing_in_pai(tmp_path, capsys):
    assert gather.default_folder(tmp_path) == tmp_path / "PAI"  # nothing adopted: the default, as before
    _remember(_spec(tmp_path, "--save-dir", "out/a"), "out/a")
    assert gather.default_folder(tmp_path) == tmp_path / "out" / "a"
    (tmp_path / "PAI" / ".pai-launch").mkdir(parents=True)  # a stray folder of an older pai-launch
    assert gather.default_folder(tmp_path) == tmp_path / "out" / "a"
    (tmp_path / "PAI" / "array_dims.csv").write_text(".fc1,1,32\n")  # a script writes ./PAI: that one
    assert gather.default_folder(tmp_path) == tmp_path / "PAI"


def test_status_without_an_argument_warns_of_a_torn_record_and_reads_pai(tmp_path, capsys):
    adoptions.record_path(tmp_path).write_text("{")
    assert gather.default_folder(tmp_path) == tmp_path / "PAI"
    assert "pai-launch: warning:" in capsys.readouterr().err
