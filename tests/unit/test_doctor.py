"""pai-launch doctor: each PerforatedAI DDP protocol item found (or not) in scripts read with ast, never run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pai_launch.doctor import diagnose
from pai_launch.doctor.diagnose import DoctorError, check_script, exit_code, render_json, render_text
from tests.unit.doctor_mutations import MUTATIONS, write_broken

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "doctor_scripts"
PROJECTS = SCRIPTS / "projects"
EXAMPLE = ROOT / "examples" / "train_pai_ddp.py"


def ids(report) -> set[str]:
    return {f.id for f in report.findings}


def line_of(path: Path, text: str) -> int:
    """The 1-based line of the first line of `path` containing `text`."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("script", [EXAMPLE] + sorted((SCRIPTS / "good").glob("*.py")), ids=lambda p: p.name)
def test_correct_scripts_have_no_errors(script):
    report = check_script(script)
    assert exit_code(report) == 0, render_text(report)
    if script.name == "pai_style_ddp.py":  # the published single-GPU pattern: it always loads latest
        assert ids(report) == {"resume-from-latest"}, render_text(report)
    elif script.name != "not_pai.py":
        assert report.findings == (), render_text(report)


def test_the_example_reads_its_save_folder_and_resume_stage():
    report = check_script(EXAMPLE)
    assert (report.save_name, report.resume_stage) == ("PAI", "switch")


def test_the_guides_published_pattern_has_its_races():
    script = SCRIPTS / "broken" / "guide_pattern.py"
    report = check_script(script)
    found = {(f.id, f.severity, f.line) for f in report.findings}
    assert found == {
        ("perforate-model-race", "error", line_of(script, "UPA.perforate_model(")),
        ("ddp-broadcast-buffers", "error", line_of(script, "DistributedDataParallel(")),
        ("init-barrier-unguarded", "error", line_of(script, "torch.distributed.barrier()")),
        ("validation-score-race", "warning", line_of(script, "add_validation_score(val_acc, model_unwrapped)")),
    }
    assert exit_code(report) == 1


#: broken script -> (finding id, severity, text on the line it points at, or None for "missing")
ONE_PER_CHECK = {
    "no_flags": [("flag-perforate-model-parallel", "error", None), ("flag-pai-load-folder", "error", None)],
    "load_after_optimizer": [("load-after-optimizer", "warning", "UPA.load_system(")],
    "no_resume": [("resume-missing", "error", None)],
    "plain_optimizer": [("optimizer-not-from-tracker", "error", "torch.optim.SGD(")],
    "ddp_broadcast_buffers": [("ddp-broadcast-buffers", "error", "DistributedDataParallel(")],
    "ddp_find_unused": [("ddp-find-unused-parameters", "error", "DistributedDataParallel(")],
    "perforate_race": [("perforate-model-race", "error", "UPA.perforate_model(")],
    "init_barrier": [("init-barrier-unguarded", "error", "            dist.barrier()")],
    "init_no_save": [("init-settings-not-saved", "error", None)],
    "init_no_exit": [("init-no-exit", "warning", "save_tracker_settings()")],
    "validation_wrapped": [("validation-score-wrapped-model", "error", "add_validation_score(")],
    "validation_rank0_only": [("validation-score-rank0-only", "error", "add_validation_score(")],
    "validation_race": [("validation-score-race", "warning", "add_validation_score(")],
    "restructured_first": [("restructured-before-complete", "error", "if restructured:")],
    "marker_every_rank": [("marker-every-rank", "warning", "open(os.path.join(args.save")],
    "marker_missing": [("marker-missing", "error", None)],
    "generation_end": [("generation-end-barrier", "warning", "sys.exit(0)\n"),
                       ("generation-end-destroy", "warning", "sys.exit(0)\n")],
    "prompts_missing": [("prompt-configuration-confirmed", "error", None),  # SGD without weight decay: no prompt
                        ("prompt-unwrapped-modules", "warning", None)],
    "prompts_late": [("prompt-configuration-confirmed", "error", "set_configuration_confirmed(True)")],
    "capacity_test_late": [("testing-dendrite-capacity-late", "error", "set_testing_dendrite_capacity(False)")],
    "init_process_group": [("init-process-group-unguarded", "error", "dist.init_process_group(")],
    "ddp_wrapper_discarded": [("ddp-wrapper-discarded", "warning", "model = model.module")],
    "resume_latest": [("resume-from-latest", "warning", '"latest"')],
    "save_removed": [("save-folder-removed", "error", "shutil.rmtree(")],
    "restructure_same_process": [("restructure-no-exit", "warning", "elif restructured and not complete:")],
    "flag_hyphens": [("flag-pai-load-folder", "error", None)],
    "initialize_pai": [("initialize-pai-removed", "error", "UPA.initialize_pai(")],
    "legacy_api": [("perforatedai-legacy-api", "error", "pb_globals")],
    "demo_mode": [("perforate-model-demo-mode", "error", "UPA.perforate_model(")],
    "initialize_dendrites": [("initialize-dendrites", "error", "UPA.initialize_dendrites(")],
}


def _expected_line(script: Path, text: str | None) -> int | None:
    if text is None:
        return None
    if text.endswith("\n"):  # the last line that is exactly this statement
        lines = script.read_text().splitlines()
        return max(n for n, line in enumerate(lines, 1) if line.strip() == text.strip())
    return line_of(script, text)


def test_every_broken_variant_is_checked():
    assert sorted(ONE_PER_CHECK) == sorted(MUTATIONS)


@pytest.mark.parametrize("name", sorted(ONE_PER_CHECK))
def test_each_broken_script_gets_exactly_its_finding(name, tmp_path):
    script = write_broken(name, tmp_path)
    report = check_script(script)
    expected = {(i, s, _expected_line(script, t)) for i, s, t in ONE_PER_CHECK[name]}
    assert {(f.id, f.severity, f.line) for f in report.findings} == expected, render_text(report)
    assert exit_code(report) == (1 if any(s == "error" for _i, s, _t in ONE_PER_CHECK[name]) else 0)


def test_a_naive_ddp_port_of_a_single_gpu_example():
    script = SCRIPTS / "broken" / "pai_style_naive.py"
    report = check_script(script)
    assert ids(report) == {"validation-score-wrapped-model", "validation-score-race", "restructured-before-complete",
                           "perforate-model-race", "ddp-find-unused-parameters", "ddp-broadcast-buffers",
                           "generation-end-barrier", "generation-end-destroy", "resume-from-latest"}
    first = {f.id: f.line for f in report.findings}
    assert first["restructured-before-complete"] == line_of(script, "if(restructured):")
    assert first["validation-score-wrapped-model"] == line_of(script, "add_validation_score(")


def test_a_script_without_perforatedai_gets_one_warning():
    report = check_script(SCRIPTS / "good" / "not_pai.py")
    assert [(f.id, f.severity) for f in report.findings] == [("not-perforatedai", "warning")]
    assert (report.save_name, report.resume_stage, exit_code(report)) == (None, None, 0)


def test_resume_stage_switch_and_latest(tmp_path):
    assert check_script(SCRIPTS / "good" / "minimal_ddp.py").resume_stage == "switch"   # glob switch_*.pt
    assert check_script(SCRIPTS / "good" / "aliases_helpers.py").resume_stage == "switch"  # "switch_%d" % n
    assert check_script(SCRIPTS / "good" / "training_helpers.py").resume_stage == "switch"  # load_newest
    assert check_script(SCRIPTS / "good" / "pai_style_ddp.py").resume_stage == "latest"
    assert check_script(write_broken("no_resume", tmp_path)).resume_stage is None


def test_save_name_from_a_literal_and_from_an_argparse_default():
    assert check_script(SCRIPTS / "good" / "aliases_helpers.py").save_name == "runs/alias"  # positional literal
    assert check_script(SCRIPTS / "good" / "pai_style_ddp.py").save_name == "PAIExample"  # --save-name's default
    assert check_script(SCRIPTS / "good" / "training_helpers.py").save_name == "out/pai"  # dest= default


def test_a_different_expected_save_name_is_a_finding():
    literal = check_script(SCRIPTS / "good" / "aliases_helpers.py", expected_save_name="PAI")
    assert [(f.id, f.severity) for f in literal.findings] == [("save-name-mismatch", "error")]
    assert "runs/alias" in literal.findings[0].message and "PAI" in literal.findings[0].message
    option = check_script(SCRIPTS / "good" / "minimal_ddp.py", expected_save_name="elsewhere")
    assert option.findings == () and "--save" in option.notes[-1]  # the script's arguments decide (test_doctor_save)
    assert check_script(SCRIPTS / "good" / "minimal_ddp.py", expected_save_name="./PAI/").findings == ()


def test_a_syntax_error_is_one_line_with_file_and_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n\ndef main(:\n    pass\n")
    with pytest.raises(DoctorError) as caught:
        check_script(script)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{script}:3: syntax error")
    assert diagnose.EXIT_PARSE_ERROR == 2


def test_unreadable_and_not_utf8_files(tmp_path):
    with pytest.raises(DoctorError, match=r"missing\.py: cannot read"):
        check_script(tmp_path / "missing.py")
    with pytest.raises(DoctorError, match="cannot read"):
        check_script(tmp_path)  # a folder
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\nimport torch\n")
    with pytest.raises(DoctorError, match=r"latin\.py: not UTF-8"):
        check_script(latin)


def test_the_script_is_never_run(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("raise SystemExit(7)\nimport perforatedai\n")
    assert check_script(script).script == str(script)


def test_render_json_round_trips():
    report = check_script(SCRIPTS / "broken" / "guide_pattern.py")
    data = json.loads(render_json(report))
    assert list(data) == ["script", "findings", "save_name", "resume_stage", "errors", "warnings", "files",
                          "unresolved", "notes"]
    assert data["findings"] == [{"id": f.id, "severity": f.severity, "path": f.path, "line": f.line,
                                 "message": f.message, "fix": f.fix} for f in report.findings]
    assert (data["errors"], data["warnings"], data["save_name"], data["resume_stage"]) == (3, 1, "PAI", "switch")
    assert (data["files"], data["unresolved"], data["notes"]) == ([], [], [])
    assert diagnose.Report(data["script"], tuple(diagnose.Finding(**f) for f in data["findings"]),
                         data["save_name"], data["resume_stage"]) == report


def test_render_text_names_file_and_line(tmp_path):
    script = tmp_path / "train.py"
    write_broken("no_flags", tmp_path, "flags.py")
    write_broken("ddp_broadcast_buffers", tmp_path, script.name)
    text = render_text(check_script(script))
    line = line_of(script, "DistributedDataParallel(")
    assert f"{script}:{line}: error[ddp-broadcast-buffers] " in text
    assert "\n    fix: pass broadcast_buffers=False" in text
    assert "save folder: PAI; resumes from: the newest switch_N" in text
    assert text.endswith("1 error\n")
    missing = render_text(check_script(tmp_path / "flags.py"))
    assert f"{tmp_path / 'flags.py'}: error[flag-pai-load-folder] " in missing and missing.endswith("2 errors\n")
    assert render_text(check_script(SCRIPTS / "good" / "minimal_ddp.py")).endswith("no problems found\n")
    assert render_text(check_script(SCRIPTS / "broken" / "guide_pattern.py")).endswith("3 errors, 1 warning\n")


def test_a_project_with_its_set_up_in_helper_modules_is_read_whole():
    """`from utils.ddp_utils import setup` and `import utils.pai_utils as pu; pu.f()` are walked like the script's
    own functions: no false errors, and the DDP checks find the wrapper in the helper, with its file and line."""
    script = PROJECTS / "helpers" / "train.py"
    helper = PROJECTS / "helpers" / "utils" / "ddp_utils.py"
    report = check_script(script)
    assert [(f.id, f.severity, f.path, f.line) for f in report.findings] == [
        ("ddp-broadcast-buffers", "error", str(helper), line_of(helper, "DDP(model"))], render_text(report)
    assert set(report.files) == {str(helper.with_name(n)) for n in ("ddp_utils.py", "pai_utils.py", "__init__.py")}
    assert (report.save_name, report.resume_stage, report.unresolved, report.notes) == ("PAI", "switch", (), ())
    assert f"{helper}:{line_of(helper, 'DDP(model')}: error[ddp-broadcast-buffers] " in render_text(report)


def variant(folder: Path, *changes: tuple[str, str]) -> Path:
    """minimal_ddp.py with each (old, new) text replaced, as FOLDER/train.py."""
    text = (SCRIPTS / "good" / "minimal_ddp.py").read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / "train.py"
    path.write_text(text)
    return path


GROUP = ('distributed = not init_run and "WORLD_SIZE" in os.environ\n'
         'if distributed:\n    dist.init_process_group("gloo")\n')


@pytest.mark.parametrize("guard, expected", [
    ('if "RANK" in os.environ:', set()),
    ("if not args.perforate_model_parallel:", set()),
    ('if int(os.environ.get("WORLD_SIZE", 1)) > 1:', set()),
    ('if int(os.environ.get("LOCAL_RANK", -1)) != -1:', set()),
    ("if args.perforate_model_parallel:", {("init-process-group-unguarded", "error")}),
    ("if args.multi_gpu:", {("init-process-group-unguarded", "warning")}),  # a condition doctor cannot read
], ids=lambda v: v if isinstance(v, str) else "")
def test_init_process_group_is_an_error_only_where_the_init_run_surely_gets_to_it(tmp_path, guard, expected):
    script = variant(tmp_path, (GROUP, f'{guard}\n    dist.init_process_group("gloo")\n'
                                       'distributed = not init_run and "WORLD_SIZE" in os.environ\n'))
    report = check_script(script)
    assert {(f.id, f.severity) for f in report.findings} == expected, render_text(report)


def test_init_process_group_in_a_function_walked_on_its_own_is_a_warning(tmp_path):
    script = variant(tmp_path, (GROUP, 'distributed = not init_run and "WORLD_SIZE" in os.environ\n\n\n'
                                       'def setup():\n    dist.init_process_group("gloo")\n\n\n'))
    report = check_script(script)
    assert {(f.id, f.severity) for f in report.findings} == {("init-process-group-unguarded", "warning")}


WRAP = ("        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, "
        "broadcast_buffers=False)\n")


def test_keeping_the_wrapper_and_its_module_apart_is_not_discarding_it(tmp_path):
    script = variant(tmp_path, (WRAP, WRAP + "        plain = model.module\n"))
    assert check_script(script).findings == ()


@pytest.mark.parametrize("removal, expected", [
    ("shutil.rmtree(args.save)", {("save-folder-removed", "error")}),
    ('shutil.rmtree("PAI")', {("save-folder-removed", "error")}),  # the folder perforate_model saves into
    ('subprocess.run(f"rm -rf {args.save}", shell=True)', {("save-folder-removed", "warning")}),
    ("os.rmdir(args.output_dir)", {("save-folder-removed", "warning")}),  # likely, not certainly, the save folder
    ('shutil.rmtree(os.path.join(args.save, "tmp"))', set()),  # a folder inside it
    ('shutil.rmtree("/tmp/scratch")', set()),
])
def test_removing_the_save_folder(tmp_path, removal, expected):
    script = variant(tmp_path, ("args = parser.parse_args()\n", f"args = parser.parse_args()\n{removal}\n"))
    report = check_script(script)
    assert {(f.id, f.severity) for f in report.findings} == expected, render_text(report)


@pytest.mark.parametrize("guard, severity", [
    ("if args.clean:", "warning"),  # a condition doctor cannot read
    ("if not args.resume_path:", "error"),  # the script's own option at its default: pai-launch does not pass it
])
def test_removing_it_under_a_condition(tmp_path, guard, severity):
    script = variant(tmp_path, ('parser.add_argument("--save", default="PAI")\n',
                                'parser.add_argument("--save", default="PAI")\nparser.add_argument("--clean", '
                                'action="store_true")\nparser.add_argument("--resume_path", default=None)\n'),
                     ("args = parser.parse_args()\n",
                      f"args = parser.parse_args()\n{guard}\n    shutil.rmtree(args.save)\n"))
    assert [(f.id, f.severity) for f in check_script(script).findings] == [("save-folder-removed", severity)]


def test_argparse_does_not_read_the_underscore_flag_as_a_hyphenated_option(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--pai-load-folder")
    assert parser.parse_known_args(["--pai_load_folder", "x"])[1] == ["--pai_load_folder", "x"]  # not taken
    report = check_script(write_broken("flag_hyphens", tmp_path))
    assert "spells the option --pai-load-folder" in report.findings[0].message
    assert '"--pai-load-folder", "--pai_load_folder"' in report.findings[0].fix
    aliased = variant(tmp_path, ('parser.add_argument("--pai_load_folder", default=None)',
                                 'parser.add_argument("--pai-load-folder", "--pai_load_folder", default=None)'))
    assert check_script(aliased).findings == ()


SCORE = ("    net = model.module if distributed else model\n"
         "    net, restructured, complete = in_turn(lambda: GPA.pai_tracker.add_validation_score(0.5, net))\n")
DP = (WRAP, WRAP + "    if DP_MODE:\n        model = nn.DataParallel(model)\n")


def test_a_wrapper_built_in_a_branch_exclusive_with_the_call_is_not_an_error(tmp_path):
    """`if DP_MODE: wrap` then `if distributed: ... elif DP_MODE: ... else: score(model)`: the else never sees the
    DataParallel wrapper."""
    script = variant(tmp_path, DP, (SCORE, "    if distributed:\n"
                                           "        net, restructured, complete = in_turn(lambda: "
                                           "GPA.pai_tracker.add_validation_score(0.5, model.module))\n"
                                           "    elif DP_MODE:\n        net, restructured, complete = "
                                           "GPA.pai_tracker.add_validation_score(0.5, model.module)\n"
                                           "    else:\n        net, restructured, complete = "
                                           "GPA.pai_tracker.add_validation_score(0.5, model)\n"))
    report = check_script(script)
    assert report.findings == (), render_text(report)


def test_a_wrapper_under_a_condition_doctor_cannot_tie_to_the_call_is_a_warning(tmp_path):
    script = variant(tmp_path, DP, (SCORE, "    if not distributed:\n        net, restructured, complete = "
                                           "GPA.pai_tracker.add_validation_score(0.5, model)\n"
                                           "    else:\n        net, restructured, complete = in_turn(lambda: "
                                           "GPA.pai_tracker.add_validation_score(0.5, model.module))\n"))
    report = check_script(script)
    assert [(f.id, f.severity) for f in report.findings] == [("validation-score-wrapped-model", "warning")]
    (tmp_path / "always").mkdir()
    always = variant(tmp_path / "always", (WRAP, WRAP + "    model = nn.DataParallel(model)\n"),
                     (SCORE, "    net, restructured, complete = GPA.pai_tracker.add_validation_score(0.5, model)\n"))
    assert ("validation-score-wrapped-model", "error") in {(f.id, f.severity) for f in check_script(always).findings}


def test_a_package_with_relative_imports_reached_through_sys_path():
    script = PROJECTS / "package" / "scripts" / "train.py"
    src = PROJECTS / "package" / "src"
    report = check_script(script)
    found = {(f.id, f.severity, f.path and Path(f.path).name, f.line) for f in report.findings}
    group_line = line_of(src / "dist_setup.py", "init_process_group")
    assert found == {
        ("flag-pai-load-folder", "error", None, None),
        ("init-process-group-unguarded", "error", "dist_setup.py", group_line),
        ("save-folder-removed", "error", "trainer.py", line_of(src / "trainer.py", "shutil.rmtree(")),
        ("resume-from-latest", "warning", "trainer.py", line_of(src / "trainer.py", '"latest"')),
        ("ddp-wrapper-discarded", "warning", "trainer.py", line_of(src / "trainer.py", "model = model.module")),
        ("restructure-no-exit", "warning", "trainer.py", line_of(src / "trainer.py", "elif restructured and not")),
    }, render_text(report)
    assert [(u.call, Path(u.path).name, u.why) for u in report.unresolved] == [
        ("train_one_epoch", "trainer.py", "no file in the project for .fit_loop")]
    assert {Path(f).name for f in report.files} == {"__init__.py", "trainer.py", "dist_setup.py", "model.py"}


def test_a_project_without_ddp_anywhere_says_the_ddp_checks_were_skipped():
    report = check_script(PROJECTS / "no_ddp" / "train.py")
    assert report.findings == (), render_text(report)  # the PerforatedAI helpers in src/common/ were read
    assert [(u.call, u.why) for u in report.unresolved] == [
        ("init_distributed_mode", "no file in the project for distributed_utils")]
    assert len(report.notes) == 1 and report.notes[0].startswith("DDP checks skipped")
    text = render_text(report)
    assert "\nnot followed: init_distributed_mode at " in text and "\nnote: DDP checks skipped" in text
    data = json.loads(render_json(report))
    assert data["notes"] == list(report.notes) and data["unresolved"][0]["why"] == report.unresolved[0].why
    assert exit_code(report) == 0


def test_a_single_script_without_ddp_says_so_too(tmp_path):
    script = variant(tmp_path, (GROUP, "distributed = False\n"), ("    if distributed:\n" + WRAP, ""))
    report = check_script(script)
    assert report.notes and "in the script" in report.notes[0] and report.unresolved == ()


def test_import_cycles_and_helpers_that_do_not_parse(tmp_path):
    (tmp_path / "a.py").write_text("import b\n\n\ndef setup():\n    b.setup()\n")
    (tmp_path / "b.py").write_text("import a\n\n\ndef setup():\n    a.setup()\n")
    (tmp_path / "broken_helpers.py").write_text("def setup(:\n")
    script = variant(tmp_path, ("import torch\n", "import torch\nimport a\nimport broken_helpers\n"),
                     ("GPA.pc.set_configuration_confirmed(True)\n",
                      "a.setup()\nbroken_helpers.setup_ddp()\nGPA.pc.set_configuration_confirmed(True)\n"))
    report = check_script(script)
    assert report.findings == (), render_text(report)
    assert {Path(f).name for f in report.files} == {"a.py", "b.py"}
    assert [(u.call, "syntax error" in u.why) for u in report.unresolved] == [("broken_helpers.setup_ddp", True)]


def test_every_doctor_check_a_failure_cause_names_exists():
    """A failed run names its cause with "pai-launch doctor check ID": each such ID is one doctor reports."""
    from pai_launch.wire import failure_causes

    named = {value.id for value in vars(failure_causes).values()
             if isinstance(value, failure_causes.KnownCause) and value.in_script}
    checked = {i for findings in ONE_PER_CHECK.values() for i, _s, _t in findings}
    assert named and named <= checked, named - checked


TORCHVISION_SETUP = '''distributed = not init_run and "WORLD_SIZE" in os.environ


def init_distributed_mode():
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        gpu = int(os.environ["LOCAL_RANK"])
    elif "SLURM_PROCID" in os.environ:
        gpu = 0
    else:
        print("Not using distributed mode")
        return
    dist.init_process_group("gloo", rank=int(os.environ.get("RANK", 0)), world_size=2)


init_distributed_mode()
'''


def test_a_process_group_after_a_chain_that_returns_unless_launched_is_guarded(tmp_path):
    """torchvision's init_distributed_mode: the code after the chain runs only on the branches that go on."""
    assert check_script(variant(tmp_path, (GROUP, TORCHVISION_SETUP))).findings == ()
    goes_on = TORCHVISION_SETUP.replace('        print("Not using distributed mode")\n        return\n',
                                        '        print("Not using distributed mode")\n')
    found = check_script(variant(tmp_path, (GROUP, goes_on))).findings
    assert {f.id for f in found} == {"init-process-group-unguarded"}


def test_unwrapping_after_the_loop_that_wraps_is_not_discarding_the_wrapper(tmp_path):
    """A wrapper rebuilt late in the loop (after a restructure) and unwrapped after the loop, to save the model."""
    end = "            dist.destroy_process_group()\n        sys.exit(0)\n"
    script = variant(tmp_path, ("    net = model.module if distributed else model\n",
                                "    net = model.module if distributed else model\n    if distributed:\n" + WRAP),
                     (end, end + "model = model.module\n"))
    assert check_script(script).findings == ()


@pytest.mark.parametrize("optimizer, args", [
    ("torch.optim.SGD", '"lr": 0.1, "weight_decay": 1e-4'),
    ("torch.optim.AdamW", '"lr": 0.1'),  # AdamW's default weight decay is 0.01
    ("make_optimizer()", '"lr": 0.1'),  # a class doctor cannot read
])
def test_weight_decay_is_no_prompt(tmp_path, optimizer, args):
    """perforatedai accepts weight decay by default (tests/real holds that to the installed package): an optimizer
    that decays, without set_weight_decay_accepted, is not a finding."""
    script = variant(tmp_path, ("GPA.pc.set_weight_decay_accepted(True)\n", ""),
                     ('GPA.pai_tracker.set_optimizer(torch.optim.SGD)\noptimizer, scheduler = GPA.pai_tracker.'
                      'setup_optimizer(model, {"params": model.parameters(), "lr": 0.1}, {})\n',
                      f"GPA.pai_tracker.set_optimizer({optimizer})\noptimizer, scheduler = GPA.pai_tracker."
                      f'setup_optimizer(model, {{"params": model.parameters(), {args}}}, {{}})\n'))
    assert check_script(script).findings == ()


def test_a_later_branch_on_a_test_whose_ddp_ranks_already_exited_is_not_ddp(tmp_path):
    """`if complete: if distributed: leave()` (leave ends in sys.exit) then `if complete: break`: only a single
    process gets to the break, so it needs no barrier."""
    end = ("    if complete or restructured:\n        if distributed:\n            dist.barrier()\n"
           "            dist.destroy_process_group()\n        sys.exit(0)\n")
    script = variant(tmp_path, ("while True:\n", "def leave():\n    dist.barrier()\n    dist.destroy_process_group()\n"
                                                 "    sys.exit(0)\n\n\nwhile True:\n"),
                     (end, "    if complete:\n        if distributed:\n            leave()\n"
                           "    elif restructured:\n        leave()\n    if complete:\n        break\n"))
    report = check_script(script)
    assert report.findings == (), render_text(report)


COMPLETE_THEN_REWRAP = ('''    if complete or restructured:
        if distributed:
            dist.barrier()
            dist.destroy_process_group()
        sys.exit(0)''', '''    if complete:
        if distributed:
            dist.barrier()
            dist.destroy_process_group()
        sys.exit(0)
    if restructured:
        model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True, broadcast_buffers=False)
        optimizer, scheduler = GPA.pai_tracker.setup_optimizer(net, {"params": net.parameters(), "lr": 0.1}, {})''')


def _rewrap_variant(tmp_path, *changes):
    first = COMPLETE_THEN_REWRAP
    return variant(tmp_path, first, *changes)


def test_a_hand_written_in_process_rewrap_that_keeps_every_condition_is_clean(tmp_path):
    report = check_script(_rewrap_variant(tmp_path))
    assert report.findings == (), render_text(report)


@pytest.mark.parametrize("change, expected", [
    (('''        optimizer, scheduler = GPA.pai_tracker.setup_optimizer(net, {"params": net.parameters(), '''
      '''"lr": 0.1}, {})''',
      "        pass"), "rewrap-no-optimizer"),
    (("net, restructured, complete = in_turn(lambda: GPA.pai_tracker.add_validation_score(0.5, net))",
      "net, restructured, complete = GPA.pai_tracker.add_validation_score(0.5, net)"), "rewrap-scores-at-once"),
    (("model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True, broadcast_buffers=False)",
      "model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True)"), "ddp-broadcast-buffers"),
    (("model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True, broadcast_buffers=False)",
      "model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True, forward_sync_buffers=False)"),
     "ddp-forward-sync-buffers"),
], ids=["no-new-optimizer", "all-ranks-at-once", "buffers-broadcast", "forward-sync-buffers"])
def test_a_hand_written_in_process_rewrap_missing_a_condition_is_an_error(tmp_path, change, expected):
    report = check_script(_rewrap_variant(tmp_path, change))
    errors = {f.id for f in report.findings if f.severity == "error"}
    assert expected in errors, render_text(report)
    assert "restructure-no-exit" not in ids(report)  # it stays on purpose: told what it misses, not to exit


def test_going_on_after_a_restructure_without_a_rewrap_is_still_told_to_exit(tmp_path):
    report = check_script(_rewrap_variant(tmp_path, (
        "        model = nn.parallel.DistributedDataParallel(net, find_unused_parameters=True, "
        "broadcast_buffers=False)\n",
        "")))
    assert "restructure-no-exit" in ids(report), render_text(report)


PERFORATE = "model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))\n"


@pytest.mark.parametrize("perforate, expected", [
    ("DEMO = True\nmodel = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), demo_mode=DEMO))\n", "error"),
    ('opts = {"save_name": args.save, "demo_mode": True}\n'
     "model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), **opts))\n", "error"),
    ("opts = dict(demo_mode=True, demo_phase_steps=5)\n"
     "model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), **opts))\n", "error"),
    ("model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), demo_mode=args.demo))\n", "warning"),  # unread
    ("model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), demo_mode=False))\n", None),
    ('opts = {"save_name": args.save, "demo_mode": False}\n'
     "model = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), **opts))\n", None),
    ("opts = {}\nmodel = in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), **opts))\n", None),
], ids=["variable", "splat-dict", "splat-dict-call", "option", "false", "splat-false", "absent"])
def test_demo_mode_is_found_through_variables_and_splats(tmp_path, perforate, expected):
    script = variant(tmp_path, (PERFORATE, perforate))
    report = check_script(script)
    found = [(f.id, f.severity, f.line) for f in report.findings]
    line = line_of(script, "UPA.perforate_model(")
    assert found == ([("perforate-model-demo-mode", expected, line)] if expected else []), render_text(report)


def test_demo_mode_through_the_training_helper_is_found_too(tmp_path):
    script = tmp_path / "train.py"
    text = (SCRIPTS / "good" / "training_helpers.py").read_text()
    script.write_text(text.replace("save_name=args.save_dir)", "save_name=args.save_dir, demo_mode=True)"))
    report = check_script(script)
    assert [(f.id, f.severity) for f in report.findings] == [("perforate-model-demo-mode", "error")]
    assert "without demo_mode" in report.findings[0].fix and "single-process" in report.findings[0].message


def test_initialize_dendrites_under_a_condition_doctor_cannot_read_is_a_warning(tmp_path):
    script = variant(tmp_path, (PERFORATE, PERFORATE + "if args.demo:\n    UPA.initialize_dendrites(model, x)\n"))
    found = [(f.id, f.severity) for f in check_script(script).findings]
    assert found == [("initialize-dendrites", "warning")]


CAPACITY_OFF = "GPA.pc.set_testing_dendrite_capacity(False)\n"
PROMPTS = "GPA.pc.set_weight_decay_accepted(True)\n"
AS_HELPER = "import pai_launch.training as pt\n"


@pytest.mark.parametrize("changes, expected", [
    ([], None),  # never turned off: PerforatedAI's own capacity test, which ends by itself
    ([(PROMPTS, PROMPTS + CAPACITY_OFF)], None),
    ([(PROMPTS, PROMPTS + AS_HELPER + "pt.configure_without_prompts(testing_dendrite_capacity=False)\n")], None),
    ([(PROMPTS, PROMPTS + CAPACITY_OFF), (PERFORATE, PERFORATE + CAPACITY_OFF)], None),  # already off before
    ([(PERFORATE, PERFORATE + "GPA.pc.set_testing_dendrite_capacity(True)\n")], None),  # a test on purpose
    ([(PERFORATE, PERFORATE + "OFF = False\nGPA.pc.set_testing_dendrite_capacity(OFF)\n")], "error"),
    ([(PERFORATE, PERFORATE + AS_HELPER + "pt.configure_without_prompts(testing_dendrite_capacity=False)\n")],
     "error"),
    ([(PERFORATE, PERFORATE + "if args.real_run:\n    " + CAPACITY_OFF)], "warning"),  # a condition unread
    ([(PERFORATE, PERFORATE + "\n\ndef settings():\n    " + CAPACITY_OFF + "\n\n")], "warning"),  # never called
    ([(PERFORATE, "if init_run:\n    " + PERFORATE + "else:\n    " + CAPACITY_OFF)], None),  # never both
], ids=["never", "before", "helper-before", "before-and-after", "true-after", "variable-after", "helper-after",
        "after-under-a-condition", "after-in-a-function-walked-alone", "exclusive-branches"])
def test_the_capacity_test_turned_off_after_perforate_model(tmp_path, changes, expected):
    """perforate_model takes the capacity test's settings (1000 dendrites, a switch every epoch): turned off only
    afterwards, nothing stops the run."""
    script = variant(tmp_path, *changes)
    report = check_script(script)
    found = [(f.id, f.severity, f.line) for f in report.findings]
    if expected is None:
        assert found == [], render_text(report)
        return
    line = max(n for n, text in enumerate(script.read_text().splitlines(), 1) if "testing_dendrite_capacity" in text)
    assert found == [("testing-dendrite-capacity-late", expected, line)], render_text(report)
    finding = report.findings[0]
    assert f"after perforate_model (line {line_of(script, 'UPA.perforate_model(')})" in finding.message
    assert "configure_without_prompts(testing_dendrite_capacity=False)" in finding.fix
    assert "\n" not in finding.message + finding.fix


NO_OPTIONS = ("import torch\nfrom perforatedai import globals_perforatedai as GPA\n"
              "from perforatedai import utils_perforatedai as UPA\n{extra}"
              "GPA.pc.set_configuration_confirmed(True)\nGPA.pc.set_unwrapped_modules_confirmed(True)\n"
              "model = UPA.perforate_model(torch.nn.Linear(4, 2))\n")


@pytest.mark.parametrize("extra, ignored", [
    ("", True),
    ("import sys\nEPOCHS = int(sys.argv[1])\n", False),
    ("import click\n", False),
    ("from transformers import HfArgumentParser\n", False),
])
def test_a_script_that_reads_no_options_ignores_the_flags(tmp_path, extra, ignored):
    """Without argparse or sys.argv the flags are not rejected but ignored: the init run trains as a whole run."""
    script = tmp_path / "train.py"
    script.write_text(NO_OPTIONS.format(extra=extra))
    flags = [f for f in check_script(script).findings if f.id.startswith("flag-")]
    assert [(f.id, f.severity) for f in flags] == [("flag-perforate-model-parallel", "error"),
                                                  ("flag-pai-load-folder", "error")]
    assert all(("reads no command-line options" in f.message) is ignored for f in flags)
    assert all(("argparse exits 2" in f.message) is not ignored for f in flags)
