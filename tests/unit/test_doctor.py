"""pai-launch doctor: each PerforatedAI DDP protocol item found (or not) in scripts read with ast, never run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pai_launch import doctor
from pai_launch.doctor import DoctorError, check_script, exit_code, render_json, render_text
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
    "prompts_missing": [("prompt-configuration-confirmed", "error", None),
                        ("prompt-unwrapped-modules", "warning", None), ("prompt-weight-decay", "warning", None)],
    "prompts_late": [("prompt-configuration-confirmed", "error", "set_configuration_confirmed(True)")],
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
    assert [(f.id, f.severity) for f in option.findings] == [("save-name-mismatch", "warning")]  # --save may change it
    assert check_script(SCRIPTS / "good" / "minimal_ddp.py", expected_save_name="./PAI/").findings == ()


def test_a_syntax_error_is_one_line_with_file_and_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n\ndef main(:\n    pass\n")
    with pytest.raises(DoctorError) as caught:
        check_script(script)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{script}:3: syntax error")
    assert doctor.EXIT_PARSE_ERROR == 2


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
    assert doctor.Report(data["script"], tuple(doctor.Finding(**f) for f in data["findings"]),
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
