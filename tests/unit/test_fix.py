"""doctor --fix's set-up and ordering fixers on the broken variants of minimal_ddp.py: the finding is gone, the file
is the correct script again (or it with only the edit), and a second fix changes nothing."""

from __future__ import annotations

import io
from pathlib import Path

import libcst
import pytest

from pai_launch.doctor.diagnose import check_script
from pai_launch.fix import engine, run, workspace
from pai_launch.fix.registry import FIXERS
from tests.unit.doctor_mutations import BASE, write_broken
from tests.unit.fix_projects import write_helper_project

pytestmark = pytest.mark.timeout(60)

GOOD = BASE.read_text()
DDP_LINE = "model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, broadcast_buffers=False)\n"
PERFORATE = "model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n"
FLAGS = 'parser.add_argument("--perforate_model_parallel", action="store_true")\n' \
        'parser.add_argument("--pai_load_folder", default=None)\n'
SAVE = 'parser.add_argument("--save", default="PAI")\n'

#: variant -> (the ids it fixes, the fixed file as edits of the correct script: (old, new) applied in turn)
EXPECTED: dict[str, tuple[set[str], list[tuple[str, str]]]] = {
    "ddp_broadcast_buffers": ({"ddp-broadcast-buffers"}, []),
    "ddp_find_unused": ({"ddp-find-unused-parameters"}, [(
        DDP_LINE, ("model = nn.parallel.DistributedDataParallel(model, broadcast_buffers=False, "
                   "find_unused_parameters=True)\n"))]),
    "no_flags": ({"flag-perforate-model-parallel", "flag-pai-load-folder"}, [(FLAGS + SAVE, SAVE + FLAGS)]),
    "flag_hyphens": ({"flag-pai-load-folder"}, [(
        '"--pai_load_folder", default=None', '"--pai-load-folder", "--pai_load_folder", default=None')]),
    "capacity_test_late": ({"testing-dendrite-capacity-late"}, [(
        PERFORATE, "GPA.pc.set_testing_dendrite_capacity(False)\n" + PERFORATE)]),
    "prompts_late": ({"prompt-configuration-confirmed"}, [(
        "GPA.pc.set_configuration_confirmed(True)\n", ""),
        (PERFORATE, "GPA.pc.set_configuration_confirmed(True)\n" + PERFORATE)]),
    "prompts_missing": ({"prompt-configuration-confirmed", "prompt-unwrapped-modules"}, [(
        "GPA.pc.set_weight_decay_accepted(True)\n", "")]),
    "initialize_pai": ({"initialize-pai-removed"}, []),  # renamed back to perforate_model: the correct script
    "validation_wrapped": ({"validation-score-wrapped-model"}, [(
        "    net = model.module if distributed else model\n", "    net = model\n"),
        ("add_validation_score(0.5, net)", 'add_validation_score(0.5, getattr(net, "module", net))')]),
}


def fix_in_copy(script: Path, fixers=FIXERS) -> tuple[engine.Outcome, dict[Path, str]]:
    """The fix loop on a copy of the script's files: its outcome and the fixed text per changed file."""
    space = workspace.Workspace(script, check_script(script))
    try:
        outcome = engine.fix_all(lambda: check_script(space.script), space.read, space.write, fixers)
        return outcome, {copy.real: text for copy, text in space.changes()}
    finally:
        space.close()


def edited(edits: list[tuple[str, str]]) -> str:
    text = GOOD
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_a_fix_clears_its_finding_changes_only_its_edit_and_a_second_fix_changes_nothing(tmp_path, variant):
    ids, edits = EXPECTED[variant]
    script = write_broken(variant, tmp_path)
    assert {f.id for f in check_script(script).findings} == ids
    outcome, changed = fix_in_copy(script)
    assert set(changed) == {script.resolve()}
    assert changed[script.resolve()] == edited(edits)
    assert outcome.report.findings == () and {ident for ident, _path in outcome.applied} == ids
    script.write_text(changed[script.resolve()])
    assert check_script(script).findings == ()
    again, changed_again = fix_in_copy(script)
    assert changed_again == {} and again.applied == []


def test_diff_prints_the_edit_and_changes_nothing(tmp_path):
    script = write_broken("ddp_broadcast_buffers", tmp_path)
    before = script.read_bytes()
    out, err = io.StringIO(), io.StringIO()
    assert run.main(script, diff=True, force=False, out=out, err=err) == 0
    assert script.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [script.name]
    diff = out.getvalue().splitlines()
    assert diff[:2] == [f"--- {script}", f"+++ {script}"]
    assert [line[1:].strip() for line in diff if line.startswith(("-", "+")) and line[1:2] not in "-+"] == [
        DDP_LINE.replace(", broadcast_buffers=False", "").strip(), DDP_LINE.strip()]
    assert err.getvalue().splitlines()[-2:] == [f"would fix {script}: ddp-broadcast-buffers",
                                                "1 fix to make; no problems left"]


def test_what_is_left_says_why_one_line_each(tmp_path):
    script = write_broken("load_after_optimizer", tmp_path)
    out = io.StringIO()
    assert run.main(script, diff=True, force=False, out=out, err=out) == 0
    assert out.getvalue().splitlines() == [
        f"left {script}:46: warning[load-after-optimizer] {engine.NO_FIXER}", "nothing to fix; 1 warning left"]


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


HEAD = ("import argparse\nimport os\n\nimport torch.distributed as dist\nimport torch.nn as nn\n"
        "from perforatedai import utils_perforatedai as UPA\n\n")


def test_a_script_without_a_parser_is_unfixable_with_the_reason(tmp_path):
    script = _script(tmp_path, GOOD.replace(FLAGS, "").replace("parser.parse_args()", "parser.parse_known_args()[0]")
                     .replace("parser = argparse.ArgumentParser()\n", "parser = argparse.ArgumentParser()\n"
                              "other = argparse.ArgumentParser()\n")
                     .replace(SAVE, SAVE + "other.parse_args([])\n"))
    outcome, changed = fix_in_copy(script)
    assert changed == {}
    left = {f.id: engine.reason(outcome, f, FIXERS) for f in outcome.report.findings}
    assert left["flag-pai-load-folder"].startswith("several parsers call parse_args here (other, parser)"), left


def test_ddp_keywords_from_a_dict_are_never_guessed(tmp_path):
    script = _script(tmp_path, GOOD.replace("DistributedDataParallel(model, find_unused_parameters=True, "
                                            "broadcast_buffers=False)", "DistributedDataParallel(model, **options)")
                     .replace("if not init_run:\n", "options = dict(find_unused_parameters=True)\nif not init_run:\n"))
    outcome, changed = fix_in_copy(script)
    assert changed == {}
    (left,) = outcome.report.findings
    assert left.id == "ddp-broadcast-buffers" and "**dict" in engine.reason(outcome, left, FIXERS)


def test_a_multi_line_call_keeps_its_layout_and_comments(tmp_path):
    script = _script(tmp_path, GOOD.replace(
        "        " + DDP_LINE,
        "        model = nn.parallel.DistributedDataParallel(  # keep\n            model,\n"
        "            find_unused_parameters=True,\n        )\n"))
    _outcome, changed = fix_in_copy(script)
    assert "DistributedDataParallel(  # keep\n            model,\n            find_unused_parameters=True,\n" \
           "            broadcast_buffers=False,\n        )\n" in changed[script.resolve()]


def test_the_globals_import_is_added_when_the_script_has_no_name_for_it(tmp_path):
    text = GOOD.replace("from perforatedai import globals_perforatedai as GPA\n", "") \
        .replace("GPA.pc.set_configuration_confirmed(True)\nGPA.pc.set_unwrapped_modules_confirmed(True)\n", "") \
        .replace("GPA.pc.set_weight_decay_accepted(True)\n", "# perforate, one rank at a time\n") \
        .replace("GPA.", "UPA.GPA.")
    script = _script(tmp_path, text)
    outcome, changed = fix_in_copy(script)
    fixed = changed[script.resolve()]
    assert "from perforatedai import utils_perforatedai as UPA\nfrom perforatedai import globals_perforatedai as " \
        "GPA\n" \
           in fixed
    assert "\n\nGPA.pc.set_configuration_confirmed(True)\nGPA.pc.set_unwrapped_modules_confirmed(True)\n" \
           "# perforate, one rank at a time\n" + PERFORATE in fixed
    assert not {"prompt-configuration-confirmed", "prompt-unwrapped-modules"} & {f.id for f in outcome.report.findings}


def test_the_capacity_test_in_another_block_is_unfixable(tmp_path):
    script = _script(tmp_path, GOOD.replace(PERFORATE, PERFORATE + "if True:\n"
                                            "    GPA.pc.set_testing_dendrite_capacity(False)\n"))
    outcome, changed = fix_in_copy(script)
    assert changed == {}
    (left,) = outcome.report.findings
    assert "not in the same block as perforate_model" in engine.reason(outcome, left, FIXERS)


def test_the_unwrapped_model_is_dot_module_where_the_wrapper_is_sure(tmp_path):
    script = _script(tmp_path, HEAD + (
        "from perforatedai import globals_perforatedai as GPA\n\n"
        "parser = argparse.ArgumentParser()\n" + FLAGS + "args = parser.parse_args()\n"
        "GPA.pc.set_configuration_confirmed(True)\nGPA.pc.set_unwrapped_modules_confirmed(True)\n"
        "model = UPA.perforate_model(nn.Linear(8, 2), save_name='PAI')\n"
        "ddp = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, broadcast_buffers=False)\n"
        "model, restructured, complete = GPA.pai_tracker.add_validation_score(0.5, ddp)\n"))
    assert "validation-score-wrapped-model" in {f.id for f in check_script(script).findings}
    only = "validation-score-wrapped-model"
    outcome, changed = fix_in_copy(script, {only: FIXERS[only]})
    assert "GPA.pai_tracker.add_validation_score(0.5, ddp.module)\n" in changed[script.resolve()]
    assert "validation-score-wrapped-model" not in {f.id for f in outcome.report.findings}


def test_a_script_with_no_parser_at_all_is_unfixable_with_the_reason(tmp_path):
    start = GOOD.index("parser = argparse.ArgumentParser()")
    end = GOOD.index("args = parser.parse_args()\n") + len("args = parser.parse_args()\n")
    script = _script(tmp_path, GOOD[:start] + "class args:\n    perforate_model_parallel = len(sys.argv) > 1\n"
                     "    pai_load_folder = None\n    save = 'PAI'\n" + GOOD[end:])
    outcome, changed = fix_in_copy(script)
    assert changed == {}
    reasons = {f.id: engine.reason(outcome, f, FIXERS) for f in outcome.report.findings}
    assert reasons["flag-perforate-model-parallel"].startswith("no argparse parser in this file"), reasons
    assert reasons["flag-pai-load-folder"].startswith("no argparse parser in this file"), reasons


def test_a_setting_moved_past_what_it_reads_is_never_guessed(tmp_path):
    script = _script(tmp_path, GOOD.replace(PERFORATE, PERFORATE + "off = False\n"
                                            "GPA.pc.set_testing_dendrite_capacity(off)\n"))
    outcome, changed = fix_in_copy(script)
    assert changed == {}
    (left,) = outcome.report.findings
    assert engine.reason(outcome, left, FIXERS).startswith("line 43 reads off, set after perforate_model (line 41)")


def test_a_fixer_that_fails_leaves_its_finding_with_the_reason_and_the_others_go_on(tmp_path):
    def broken(module, ctx):
        raise KeyError("oops")

    script = write_broken("no_flags", tmp_path)
    space = workspace.Workspace(script, check_script(script))
    try:
        fixers = {**FIXERS, "flag-perforate-model-parallel": broken}
        outcome = engine.fix_all(lambda: check_script(space.script), space.read, space.write, fixers)
    finally:
        space.close()
    assert [ident for ident, _path in outcome.applied] == ["flag-pai-load-folder"]
    (left,) = outcome.report.findings
    assert engine.reason(outcome, left, fixers) == "the fix failed (KeyError: 'oops')"


def test_a_file_changed_while_it_was_being_fixed_is_seen(tmp_path):
    script = write_broken("no_flags", tmp_path)
    space = workspace.Workspace(script, check_script(script))
    try:
        (copy,) = space.files.values()
        assert workspace.unchanged(copy)
        script.write_text(script.read_text() + "# edited meanwhile\n")
        assert not workspace.unchanged(copy)
    finally:
        space.close()
    assert not space.folder.exists()


def test_a_finding_in_a_project_helper_is_fixed_in_that_file(tmp_path):
    script, helper = write_helper_project(tmp_path)
    (finding,) = check_script(script).findings
    assert (finding.id, finding.path) == ("ddp-broadcast-buffers", str(helper.resolve()))
    outcome, changed = fix_in_copy(script)
    assert changed == {helper.resolve(): helper.read_text().replace("=True)", "=True, broadcast_buffers=False)")}
    assert outcome.report.findings == ()


def test_a_fix_given_up_on_is_tried_again_once_another_fix_makes_it_possible():
    """The engine on a fake project: 'needs-flag' cannot be fixed until 'flag' is, and comes first in the report."""
    from pai_launch.doctor.model import ERROR, Finding, Report
    from pai_launch.fix.edit import Unfixable
    from pai_launch.fix.engine import fix_all

    files = {Path("train.py"): "x = 1\n"}

    def check() -> Report:
        text = files[Path("train.py")]
        found = [Finding(i, ERROR, None, i, i) for i, done in (("needs-flag", "SAVED"), ("flag", "FLAG"))
                 if done not in text]
        return Report("train.py", tuple(found), None, None)

    def needs_flag(module, ctx):
        if "FLAG" not in module.code:
            raise Unfixable("no flag to read")
        return module.with_changes(body=[*module.body, *libcst.parse_module("SAVED = 1\n").body])

    def flag(module, ctx):
        return module.with_changes(body=[*module.body, *libcst.parse_module("FLAG = 1\n").body])

    outcome = fix_all(check, files.__getitem__, files.__setitem__, {"needs-flag": needs_flag, "flag": flag})
    assert outcome.report.findings == ()
    assert outcome.applied == [("flag", "train.py"), ("needs-flag", "train.py")]


@pytest.mark.parametrize("call, why", [
    ("UPA.initialize_pai(nn.Linear(8, 2), save_name=args.save, doing_pb=True)", "has no parameter doing_pb"),
    ("UPA.initialize_pai(nn.Linear(8, 2), **settings)", "*args or **kwargs"),
])
def test_an_initialize_pai_call_perforate_model_cannot_take_is_left_with_the_reason(tmp_path, call, why):
    script = tmp_path / "train.py"
    script.write_text(GOOD.replace("UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)", call)
                      .replace("args = parser.parse_args()\n", "args = parser.parse_args()\nsettings = {}\n"))
    outcome, changed = fix_in_copy(script)
    assert changed == {}
    assert [(i, why in r[0]) for (i, _p), r in outcome.reasons.items()] == [("initialize-pai-removed", True)]
