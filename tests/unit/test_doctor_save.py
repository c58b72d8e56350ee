"""doctor's save-name-mismatch for a save folder the script takes from its own option: decided by the arguments the
script runs with (a launch passes them), and only a note without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_launch.cli import beforerun
from pai_launch.doctor.diagnose import check_script, render_text
from pai_launch.doctor.save_args import given, option_flags
from pai_launch.placement.spec import LaunchSpec

pytestmark = pytest.mark.timeout(60)

GOOD = Path(__file__).resolve().parents[1] / "doctor_scripts" / "good" / "minimal_ddp.py"  # --save, default "PAI"


def test_without_the_scripts_arguments_an_option_is_a_note_not_a_finding():
    report = check_script(GOOD, expected_save_name="runs/a")
    assert report.findings == (), render_text(report)
    assert report.notes == (("save folder: the script takes it from --save (default 'PAI'); whether that is "
                            "pai-launch's --save-name 'runs/a' depends on the arguments the script runs with, which "
                            "doctor cannot tell without (a launch checks them)"),)
    assert "note: " + report.notes[0] in render_text(report).splitlines()
    assert check_script(GOOD, expected_save_name="PAI").notes == ()  # the default matches: nothing to say
    assert check_script(GOOD).notes == ()


@pytest.mark.parametrize("args, expected", [
    ([], ("save-name-mismatch", "'PAI' (its option's default, which the script's arguments leave as it is)")),
    (["--save", "runs/a"], None),
    (["--save=runs/a", "--epochs", "3"], None),
    (["--sa", "runs/a"], None),  # argparse takes a unique prefix of a long option
    (["--save", "runs/a", "--save", "runs/b"], ("save-name-mismatch", ("'runs/b' (its option, from the script's "
                                                                      "arguments)"))),
    (["--", "--save", "runs/a"], ("save-name-mismatch", "'PAI'")),  # after --, not an option
], ids=["default", "given", "equals", "prefix", "last-wins", "after-dashes"])
def test_with_the_scripts_arguments_the_option_is_read_from_them(args, expected):
    report = check_script(GOOD, expected_save_name="runs/a", script_args=args)
    assert report.notes == ()
    if expected is None:
        assert report.findings == (), render_text(report)
        return
    (finding,) = report.findings
    assert (finding.id, finding.severity) == ("save-name-mismatch", "error")
    assert f"the script saves into {expected[1]}" in finding.message and "not 'runs/a'" in finding.message


def test_option_flags_and_values_read_without_argparse(tmp_path):
    import ast

    tree = ast.parse('p.add_argument("--save-dir", "-s", default="out")\np.add_argument("--seed", type=int)\n'
                     'p.add_argument("--out", dest="save_to")\n')
    flags = option_flags([tree])
    assert flags == {"save_dir": ["--save-dir", "-s"], "seed": ["--seed"], "save_to": ["--out"]}
    every = [f for found in flags.values() for f in found]
    assert given(["-s", "x"], flags["save_dir"], every) == "x"
    assert given(["--s", "x"], flags["save_dir"], every) is None  # a prefix of two options: ambiguous
    assert given(["--save", "x"], flags["save_dir"], every) == "x"
    assert given(["--save-dir"], flags["save_dir"], every) is None  # no value after it


def test_a_launch_checks_the_save_folder_with_the_scripts_arguments(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(GOOD.read_text())

    def spec(*args: str) -> LaunchSpec:
        return LaunchSpec(script=Path("train.py"), workdir=tmp_path, python="python3", dry_run=True,
                          save_name="runs/a", script_args=args)

    monkeypatch.chdir(tmp_path)
    _spec, mismatched = beforerun.check_script(spec())
    _spec, matched = beforerun.check_script(spec("--save", "runs/a"))
    assert [fields["id"] for _event, fields in mismatched if "id" in fields] == ["save-name-mismatch"]
    assert matched == []
