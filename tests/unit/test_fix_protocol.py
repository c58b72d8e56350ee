"""doctor --fix's protocol fixers (pai_launch.fix.fixes_protocol): each on the broken variant of minimal_ddp.py that
doctor finds the problem in (tests/unit/doctor_mutations.py, and a few written here), read again by doctor after the
edit, applied a second time, and the shapes they refuse. Scripts are read and written, never run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import libcst as cst
import pytest

from pai_launch.doctor.diagnose import check_script
from pai_launch.doctor.model import ERROR
from pai_launch.fix.edit import FixContext, Unfixable
from pai_launch.fix.fixes_protocol import FIXERS
from tests.unit.doctor_mutations import BASE, MUTATIONS, write_broken

pytestmark = pytest.mark.timeout(60)

TURN_DEF = BASE.read_text().split("\n\ndef in_turn(fn):\n")[1].split("\n\n\n")[0]
PT_SETUP = ('distributed = not init_run and "WORLD_SIZE" in os.environ\nif distributed:\n    dist.init_process_group('
            '"gloo")\nrank = dist.get_rank() if distributed else 0\nworld = dist.get_world_size() if distributed else '
            '1\n')
RESUME = ('if args.pai_load_folder:\n    newest = max(glob.glob(os.path.join(args.pai_load_folder, "switch_*.pt")), '
          'key=os.path.getmtime)\n    model = UPA.load_system(model, args.pai_load_folder, '
          'os.path.basename(newest)[:-3]'
          ', True)\n')
MARKER = ('    if complete:\n        if rank == 0:\n            with open(os.path.join(args.save, '
          '".training_complete"), '
          '"w") as marker:\n                marker.write("complete\\n")\n')
INIT_BLOCK = '        if init_run:\n            GPA.pai_tracker.save_tracker_settings()\n            sys.exit(0)\n'

#: More variants of minimal_ddp.py, each a list of (old, new) replacements.
EXTRA: dict[str, list[tuple[str, str]]] = {
    # no in_turn of its own, and every rank perforates and scores at once
    "no_turn_helper": [("\n\ndef in_turn(fn):\n" + TURN_DEF + "\n", ""),
                       ("in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))",
                        "UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)"),
                       ("in_turn(lambda: GPA.pai_tracker.add_validation_score(0.5, net))",
                        "GPA.pai_tracker.add_validation_score(0.5, net)")],
    # the init run saves and exits before its first backward pass
    "init_save_early": [(INIT_BLOCK, ""),
                        ("        optimizer.zero_grad()\n", INIT_BLOCK + "        optimizer.zero_grad()\n")],
    # pai_launch.training's Run, and by hand a race, no resume and no marker
    "helpers": [("import torch\n", "import torch\n\nfrom pai_launch import training as pt\n"),
                (PT_SETUP, ('run = pt.start(init_run, "gloo")\n'
                            "distributed, rank, world = run.distributed, run.rank, run.world\n")),
                ("in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))",
                 "UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)"),
                (RESUME, ""), (MARKER, "")],
    # reads its rank from the process group in the init run too
    "rank_unguarded": [("            sys.exit(0)\n", '            print("rank", dist.get_rank())\n'
                        '            sys.exit(0)\n')],
    # pai_launch.training's Run, and an init run that exits without saving the settings
    "helpers_no_save": [("import torch\n", "import torch\n\nfrom pai_launch import training as pt\n"),
                        (PT_SETUP, ('run = pt.start(init_run, "gloo")\n'
                                    "distributed, rank, world = run.distributed, run.rank, run.world\n")),
                        ("            GPA.pai_tracker.save_tracker_settings()\n", "")],
    # 1.x's initialize_pai, every rank at once
    "legacy_race": [("model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))",
                     "model = UPA.initialize_pai(nn.Linear(8, 2), save_name=args.save)")],
    # a comment beside each place the fixes edit
    "commented": [("model = in_turn(", "# the model\nmodel = in_turn("), ("    if complete or", "    # the end\n"
                                                                          "    if complete or")],
}

#: (variant, the finding the fixer answers, a text the fixed script holds)
CASES = [
    ("perforate_race", "perforate-model-race", "model = in_turn(lambda: UPA.perforate_model("),
    ("legacy_race", "perforate-model-race", "model = in_turn(lambda: UPA.initialize_pai("),
    ("no_turn_helper", "perforate-model-race", "    for turn in range(dist.get_world_size()):\n"),
    ("validation_race", "validation-score-race", "= in_turn(lambda: GPA.pai_tracker.add_validation_score(0.5, net))"),
    ("validation_rank0_only", "validation-score-rank0-only",
     "    net, restructured, complete = in_turn(lambda: GPA.pai_tracker.add_validation_score(0.5, net))\n    if"),
    ("init_barrier", "init-barrier-unguarded", "            if dist.is_initialized():\n"
     "                dist.barrier()\n"),
    ("init_process_group", "init-process-group-unguarded",
     'if not args.perforate_model_parallel:\n    dist.init_process_group("gloo")\n'),
    ("init_no_save", "init-settings-not-saved", INIT_BLOCK),
    ("helpers_no_save", "init-settings-not-saved", "        if init_run:\n            pt.init_run_done(run)\n"),
    ("init_no_exit", "init-no-exit", INIT_BLOCK),
    ("init_save_early", "init-exit-before-backward", "backward()\n" + INIT_BLOCK + "        optimizer.step()"),
    ("restructured_first", "restructured-before-complete", MARKER + "    if restructured:\n"),
    ("restructure_same_process", "restructure-no-exit",
     "    elif restructured and not complete:\n        if dist.is_initialized():\n            dist.barrier()\n"),
    ("marker_missing", "marker-missing", ('        if int(os.environ.get("RANK", "0")) == 0:\n            with open('
                                          'os.path.join(args.save, ".training_complete"), "w") as marker:\n')),
    ("generation_end", "generation-end-barrier",
     "        if dist.is_initialized():\n            dist.barrier()\n            dist.destroy_process_group()\n"),
    ("generation_end", "generation-end-destroy", "            dist.destroy_process_group()\n        sys.exit(0)\n"),
    ("no_resume", "resume-missing", "import sys\nimport glob\n"),
    ("helpers", "perforate-model-race", "model = pt.in_turn(run, lambda: UPA.perforate_model("),
    ("helpers", "resume-missing", "model = pt.load_newest(run, model, args.pai_load_folder)\n"),
    ("helpers", "marker-missing", "    if complete:\n        pt.mark_complete(run, args.save)\n"),
]


def write_variant(name: str, folder: Path) -> Path:
    if name in MUTATIONS:
        return write_broken(name, folder)
    text = BASE.read_text()
    for old, new in EXTRA[name]:
        assert text.count(old) == 1, f"{name}: {old!r}"
        text = text.replace(old, new)
    path = folder / f"{name}.py"
    path.write_text(text)
    return path


def fix(path: Path, finding_id: str) -> str:
    """The script's code after the fixer for the first finding `finding_id` (which doctor must report)."""
    report = check_script(path)
    finding = next((f for f in report.findings if f.id == finding_id), None)
    assert finding is not None, [f.id for f in report.findings]
    return FIXERS[finding_id](cst.parse_module(path.read_text()), FixContext(path, finding, report)).code


def fix_all(path: Path, rounds: int = 12) -> list[str]:
    """The file with every finding these fixers answer fixed, one at a time, doctor reading it again after each (as
    --fix does); the ids fixed, in order."""
    done = []
    for _ in range(rounds):
        report = check_script(path)
        todo = [f for f in report.findings if f.id in FIXERS]
        if not todo:
            return done
        path.write_text(FIXERS[todo[0].id](cst.parse_module(path.read_text()), FixContext(path, todo[0], report)).code)
        done.append(todo[0].id)
    raise AssertionError(f"still findings to fix after {rounds} fixes: {done}")


def _errors(path: Path) -> set[str]:
    return {f.id for f in check_script(path).findings if f.severity == ERROR}


@pytest.mark.parametrize(("variant", "finding_id", "expected"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_the_fixer_ends_the_finding_and_a_second_pass_changes_nothing(tmp_path, variant, finding_id, expected):
    path = write_variant(variant, tmp_path)
    before_text, before_errors = path.read_text(), _errors(path)
    report = check_script(path)
    finding = next(f for f in report.findings if f.id == finding_id)
    fixed = FIXERS[finding_id](cst.parse_module(before_text), FixContext(path, finding, report)).code
    assert expected in fixed and expected not in before_text
    path.write_text(fixed)
    after = check_script(path)
    assert finding_id not in {f.id for f in after.findings}
    assert _errors(path) <= before_errors
    # Again, as a second --fix would (doctor reads it again), and with the finding moved to where its line now is.
    again = fixed
    for f in (f for f in after.findings if f.id in FIXERS):
        again = FIXERS[f.id](cst.parse_module(again), FixContext(path, f, after)).code
    moved = finding if finding.line is None else dataclasses.replace(finding,
                                                                     line=_moved(before_text, fixed, finding.line))
    assert FIXERS[finding_id](cst.parse_module(fixed), FixContext(path, moved, report)).code == fixed
    assert again == fixed or {f.id for f in after.findings} & set(FIXERS) - {finding_id}


def _moved(before: str, after: str, line: int) -> int:
    """Where the finding's line stands after the edit: the line holding its text (an assignment's value) nearest
    the old number."""
    text = before.splitlines()[line - 1].strip().split(" = ", 1)[-1]
    found = [n for n, seen in enumerate(after.splitlines(), 1) if text in seen]
    return min(found, key=lambda n: abs(n - line))


def test_fixes_keep_the_comments_elsewhere(tmp_path):
    path = write_variant("commented", tmp_path)
    text = path.read_text().replace("model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), "
                                    "save_name=args.save))",
                                    "model = UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)")
    text = text.replace("        if distributed:\n            dist.barrier()\n"
                        "            dist.destroy_process_group()\n", "")
    path.write_text(text)
    for finding_id in ("perforate-model-race", "generation-end-barrier"):
        path.write_text(fix(path, finding_id))
    fixed = path.read_text()
    assert "# the model\nmodel = in_turn(lambda: UPA.perforate_model(" in fixed
    assert "    # the end\n    if complete or restructured:\n        if dist.is_initialized():" in fixed
    assert fixed.startswith("# A small, correct PerforatedAI DDP script (hand-written protocol, no helpers).\n")


def test_several_fixes_in_turn_leave_a_script_doctor_finds_nothing_in(tmp_path):
    path = write_variant("no_turn_helper", tmp_path)
    text = path.read_text()
    for old, new in (MUTATIONS["generation_end"], MUTATIONS["init_no_save"], (MARKER, "")):
        text = text.replace(old, new)
    path.write_text(text)
    assert len(fix_all(path)) == 5
    assert check_script(path).findings == ()
    assert path.read_text().count("def in_turn(fn):") == 1


#: (variant, finding, the edits that give it a shape the fixer must refuse, words of the reason)
REFUSED = [
    ("validation_rank0_only", "validation-score-rank0-only",
     [("    if rank == 0:\n", '    if rank == 0:\n        print("scoring")\n')], "more than add the score"),
    ("validation_rank0_only", "validation-score-rank0-only",
     [("    restructured = complete = False\n",
       "    restructured = complete = False\n    if rank == 0:\n        score = 0.5\n"),
      ("add_validation_score(0.5, net)", "add_validation_score(score, net)")], "score is computed on rank 0 only"),
    ("init_no_save", "init-settings-not-saved",
     [("        optimizer.step()\n", "        optimizer.step()\n        model(x).sum().backward()\n")],
     "2 backward() calls"),
    ("no_resume", "resume-missing", [("args = parser.parse_args()", "args = settings()")], "--pai_load_folder"),
    ("rank_unguarded", "init-barrier-unguarded", [], "part of a larger statement"),
    ("restructured_first", "restructured-before-complete",
     [("        sys.exit(0)\n    if complete:\n", '        sys.exit(0)\n    print("scored")\n    if complete:\n')],
     "training_complete check"),
    ("restructure_same_process", "restructure-no-exit",
     [("    elif restructured and not complete:\n", "    if restructured:\n")], "after the training_complete check"),
]


@pytest.mark.parametrize(("variant", "finding_id", "edits", "why"), REFUSED, ids=[r[3] for r in REFUSED])
def test_shapes_the_fixers_cannot_edit_safely_are_refused_with_the_reason(tmp_path, variant, finding_id, edits, why):
    path = write_variant(variant, tmp_path)
    text = path.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    path.write_text(text)
    before = path.read_text()
    with pytest.raises(Unfixable) as refused:
        fix(path, finding_id)
    assert why in str(refused.value) and path.read_text() == before
