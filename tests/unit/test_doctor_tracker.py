"""pai-launch doctor on scripts that drive PerforatedAI's tracker as an object: every way a script reaches the tracker
and GPA.pc reads as the one name the checks match (doctor.api), no false errors on the paths without PerforatedAI,
and a tracker built without UPA.perforate_model (tracker-without-perforate-model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_launch.doctor import api
from pai_launch.doctor.diagnose import check_script, render_text
from tests.helpers import docs_page

pytestmark = pytest.mark.timeout(60)

SCRIPTS = Path(__file__).resolve().parents[1] / "doctor_scripts"
GOOD = SCRIPTS / "good" / "tracker_object_ddp.py"
CLASS = SCRIPTS / "projects" / "tracker_class" / "train.py"
BUILT = SCRIPTS / "broken" / "tracker_built_directly.py"


def variant(folder: Path, *changes: tuple[str, str], base: Path = GOOD) -> Path:
    """`base` with each (old, new) text replaced, as FOLDER/train.py."""
    text = base.read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / "train.py"
    path.write_text(text)
    return path


def found(script: Path) -> list[tuple[str, str, int | None]]:
    return [(f.id, f.severity, f.line) for f in check_script(script).findings]


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# the API model ------------------------------------------------------------------------------------------------------
def test_re_exports_and_a_tracker_built_in_place_read_as_the_canonical_names():
    assert api.canonical("perforatedai.utils_perforatedai.GPA.pc.set_weight_decay_accepted") == \
        "perforatedai.globals_perforatedai.pc.set_weight_decay_accepted"
    assert api.canonical("perforatedai.utils_perforatedai.TPA.UPA.GPA.pai_tracker.add_validation_score") == \
        "perforatedai.globals_perforatedai.pai_tracker.add_validation_score"
    assert api.canonical("perforatedai.tracker_perforatedai.PAINeuronModuleTracker().setup_optimizer") == \
        "perforatedai.globals_perforatedai.pai_tracker.setup_optimizer"
    assert api.canonical("perforatedai.tracker_perforatedai.PAINeuronModuleTracker") == api.TRACKER_CLASS
    assert api.canonical("torch.nn.Linear") == "torch.nn.Linear" and api.canonical(None) is None


SCORE = "    net, restructured, complete = in_turn(lambda: state.tracker.add_validation_score(0.5, net))\n"
SET_UP = "    state.tracker = make_tracker()\n"


@pytest.mark.parametrize("before, call", [
    ("", "state.tracker.add_validation_score"),  # an attribute holding a helper's return
    ("    tracker = GPA.pai_tracker\n", "tracker.add_validation_score"),  # a name, GPA through utils_perforatedai
    ("", "G.pai_tracker.add_validation_score"),  # import perforatedai.globals_perforatedai as G
    ("", "UPA.GPA.pai_tracker.add_validation_score"),  # the globals module as utils' attribute
    ("", "make_tracker().add_validation_score"),  # a helper's return value
    ("    held = make_tracker()\n", "held.add_validation_score"),
    ("    add_score = state.tracker.add_validation_score\n", "add_score"),  # a bound method
    ("    kept = state\n", "kept.tracker.add_validation_score"),  # the attribute through another name
], ids=["attribute", "variable", "module-alias", "re-export", "helper", "helper-variable", "bound-method",
        "attribute-elsewhere"])
def test_a_score_through_any_spelling_is_the_trackers(tmp_path, before, call):
    """Every rank scoring at once is found whatever the tracker is called: doctor saw the call."""
    script = variant(tmp_path, (SET_UP, SET_UP + before),
                     (SCORE, f"    net, restructured, complete = {call}(0.5, net)\n"))
    assert found(script) == [("validation-score-race", "warning", line_of(script, f"{call}(0.5, net)"))]


def test_a_tracker_handed_to_a_function_is_the_trackers(tmp_path):
    script = variant(tmp_path, ("def leave():\n", "def score(tracker, net):\n    return tracker.add_validation_score("
                                                  "0.5, net)\n\n\ndef leave():\n"),
                     (SCORE, "    net, restructured, complete = score(state.tracker, net)\n"))
    assert found(script) == [("validation-score-race", "warning", line_of(script, "return tracker.add_validation"))]


# the checks on tracker-object calls ---------------------------------------------------------------------------------
def test_the_ddp_wrapper_handed_to_the_trackers_add_validation_score_is_an_error(tmp_path):
    """PerforatedAI 3.2.9 prints "Need to call .module when using add validation score" and stops in pdb."""
    script = variant(tmp_path, ("    net = model.module if distributed else model\n", "    net = model\n"))
    assert found(script) == [("validation-score-wrapped-model", "error", line_of(script, "add_validation_score("))]


def test_only_rank_0_scoring_through_the_tracker_object_is_an_error(tmp_path):
    script = variant(tmp_path, (SCORE, "    restructured = complete = False\n    if rank == 0:\n        net, "
                                       "restructured, complete = state.tracker.add_validation_score(0.5, net)\n"))
    assert found(script) == [("validation-score-rank0-only", "error", line_of(script, "add_validation_score("))]


# no false errors --------------------------------------------------------------------------------------------------
OPTIMIZER = ('if state.tracker is not None:\n    optimizer, scheduler = state.tracker.setup_optimizer(model, '
             '{"params": model.parameters(), "lr": 0.1}, {})\nelse:\n')


@pytest.mark.parametrize("tracker_path, expected", [
    (OPTIMIZER, []),  # the good script: the baseline branch builds a torch optimizer
    (OPTIMIZER.replace("if state.tracker is not None:", "if args.doing_pai:"), []),
    ("if args.doing_pai:\n    optimizer, scheduler = runner.setup_optimizer(model, {}, {})\nelse:\n",
     [("optimizer-not-from-tracker", "warning")]),  # a setup_optimizer doctor cannot tie to the tracker
    ("if args.doing_pai:\n    optimizer = torch.optim.Adam(model.parameters())\nelse:\n",
     [("optimizer-not-from-tracker", "error")]),  # no path builds it through the tracker
], ids=["tracker-is-not-none", "doing-pai", "unread-object", "none"])
def test_the_baseline_branchs_torch_optimizer(tmp_path, tracker_path, expected):
    script = variant(tmp_path, (OPTIMIZER, tracker_path))
    report = check_script(script)
    assert [(f.id, f.severity) for f in report.findings] == expected, render_text(report)
    if expected == [("optimizer-not-from-tracker", "warning")]:
        assert "doctor cannot tell whether runner.setup_optimizer" in report.findings[0].message


END = "        leave()\n    if restructured:\n        leave()\n"


@pytest.mark.parametrize("end, expected", [
    ("        if distributed:\n            leave()\n        break\n", []),  # the DDP ranks left already
    ("        if not distributed:\n            break\n        leave()\n", []),
    ("        if world == 1:\n            break\n        leave()\n", []),
    ("        if not dist.is_initialized():\n            break\n        leave()\n", []),
    ("        if distributed:\n            sys.exit(0)\n        break\n",  # a DDP rank exits without the group's end
     [("generation-end-barrier", "warning"), ("generation-end-destroy", "warning")]),
], ids=["ddp-left", "not-distributed", "world-of-one", "no-process-group", "ddp-exit"])
def test_a_break_reached_only_in_a_single_process_needs_no_barrier(tmp_path, end, expected):
    script = variant(tmp_path, (END, end + "    if restructured:\n        leave()\n"))
    report = check_script(script)
    assert [(f.id, f.severity) for f in report.findings] == expected, render_text(report)


def test_tracker_calls_in_a_class_are_walked_where_they_run():
    """self.tracker.setup_optimizer / save_tracker_settings in a trainer's methods: doctor walks the methods
    (doctor.classes) and reads self.tracker as the tracker, so the correct script has no findings."""
    report = check_script(CLASS)
    assert report.findings == (), render_text(report)


def test_tracker_calls_in_code_doctor_does_not_walk_make_warnings_not_errors(tmp_path):
    """A nested def nothing calls: doctor says what it could not see instead of reporting the calls missing."""
    script = variant(tmp_path, ("                    self.tracker.save_tracker_settings()\n",
                                ("                    def later():\n"
                                 "                        self.tracker.save_tracker_settings()\n")), base=CLASS)
    report = check_script(script)
    assert [(f.id, f.severity) for f in report.findings] == [("init-settings-not-saved", "warning")], \
        render_text(report)
    assert f"self.tracker.save_tracker_settings at {script}:{line_of(script, 'self.tracker.save_tracker_settings(')}" \
        " may: doctor does not walk the code it is in" in report.findings[0].message


PROMPTS = ("G.pc.set_configuration_confirmed(True)\nGPA.pc.set_unwrapped_modules_confirmed(True)\n"
           "GPA.pc.set_weight_decay_accepted(True)\n")
SETTINGS = ("configuration_confirmed", "unwrapped_modules_confirmed", "weight_decay_accepted")


def _setters(prefix: str, before: str = "") -> str:
    return before + "".join(f"{prefix}set_{s}(True)\n" for s in SETTINGS)


@pytest.mark.parametrize("prompts", [
    _setters("GPA.pc."),  # GPA re-exported through utils_perforatedai
    _setters("G.pc."),  # import perforatedai.globals_perforatedai as G
    _setters("UPA.GPA.pc."),
    _setters("pc.", "pc = GPA.pc\n"),
    _setters("config().", "def config():\n    return G.pc\n\n\n"),
    _setters("PC.", "from perforatedai.globals_perforatedai import pc as PC\n"),
    _setters("quiet.", "from perforatedai.utils_perforatedai import GPA as quiet_globals\nquiet = quiet_globals.pc\n"),
], ids=["re-export", "module-alias", "utils-attribute", "variable", "helper", "from-import", "aliased-re-export"])
def test_prompt_free_settings_through_any_alias(tmp_path, prompts):
    assert found(variant(tmp_path, (PROMPTS, prompts))) == []


def test_prompt_free_settings_missing_or_on_an_object_doctor_cannot_read(tmp_path):
    missing = variant(tmp_path, (PROMPTS, _setters("GPA.pc.")[len("GPA.pc.set_configuration_confirmed(True)\n"):]))
    assert found(missing) == [("prompt-configuration-confirmed", "error", None)]
    unread = variant(tmp_path, (PROMPTS, _setters("GPA.pc.").replace("GPA.pc.set_configuration_confirmed",
                                                                     "settings().set_configuration_confirmed")))
    report = check_script(unread)
    assert [(f.id, f.severity, f.line) for f in report.findings] == [
        ("prompt-configuration-confirmed", "warning", None)], render_text(report)
    assert "doctor cannot tell whether settings().set_configuration_confirmed" in report.findings[0].message


# tracker-without-perforate-model ----------------------------------------------------------------------------------
BUILT_SCORE = "    net, restructured, complete = in_turn(lambda: tracker.add_validation_score(0.5, net))\n"
IMPORT = "from perforatedai.tracker_perforatedai import PAINeuronModuleTracker\n"
CONSTRUCT = "GPA.pai_tracker = PAINeuronModuleTracker(doing_pai=True, save_name=args.save)\n"


def test_a_tracker_built_without_perforate_model_loses_its_save_folder():
    report = check_script(BUILT)
    assert [(f.id, f.severity, f.line) for f in report.findings] == [
        ("tracker-without-perforate-model", "error", line_of(BUILT, "PAINeuronModuleTracker(doing_pai"))]
    message = report.findings[0].message
    assert "FileNotFoundError: [Errno 2] No such file or directory: ''" in message
    assert f"(line {line_of(BUILT, 'tracker.add_validation_score(')})" in message
    assert "GPA.pc.set_save_name(SAVE)" in report.findings[0].fix


@pytest.mark.parametrize("changes, expected", [
    ([(CONSTRUCT, "GPA.pc.set_save_name(args.save)\n" + CONSTRUCT)], None),  # what perforate_model would set
    ([(CONSTRUCT, CONSTRUCT.replace("PAINeuronModuleTracker(", "UPA.TPA.PAINeuronModuleTracker("))], "error"),
    ([(CONSTRUCT, "if args.name_it:\n    GPA.pc.set_save_name(args.save)\n" + CONSTRUCT)], "warning"),  # unread
    ([(BUILT_SCORE, BUILT_SCORE + "    GPA.pc.set_save_name(args.save)\n")], "error"),  # named after the first score
    ([(CONSTRUCT, CONSTRUCT.replace("PAINeuronModuleTracker(", "TPA.PAINeuronModuleTracker(")),
      (IMPORT, IMPORT + "from perforatedai import tracker_perforatedai as TPA\n")], "error"),
    ([(CONSTRUCT + "tracker = GPA.pai_tracker\n", "tracker = make_tracker(args.save)\n"),
      ("def in_turn(fn):\n", "def make_tracker(save):\n    GPA.pai_tracker = PAINeuronModuleTracker(doing_pai=True, "
                              "save_name=save)\n    return GPA.pai_tracker\n\n\ndef in_turn(fn):\n")], "error"),
    ([(CONSTRUCT, "")], "error"),  # never stored in GPA.pai_tracker: AttributeError (below)
], ids=["save-name-set", "re-exported-class", "save-name-under-a-condition", "save-name-too-late", "module-alias",
        "helper", "not-stored"])
def test_a_tracker_built_directly(tmp_path, changes, expected):
    if changes == [(CONSTRUCT, "")]:
        changes = [(CONSTRUCT + "tracker = GPA.pai_tracker\n",
                    "tracker = PAINeuronModuleTracker(doing_pai=True, save_name=args.save)\n")]
    script = variant(tmp_path, *changes, base=BUILT)
    report = check_script(script)
    if expected is None:
        assert report.findings == (), render_text(report)
        return
    assert [(f.id, f.severity, f.line) for f in report.findings] == [
        ("tracker-without-perforate-model", expected, line_of(script, "PAINeuronModuleTracker(doing_pai"))]
    message = report.findings[0].message
    if "\ntracker = PAINeuronModuleTracker(" in script.read_text():
        assert "AttributeError: 'list' object has no attribute" in message
    else:
        assert "FileNotFoundError" in message and ("cannot read" in message) == (expected == "warning")


def test_perforate_model_on_any_path_is_not_a_tracker_built_directly(tmp_path):
    script = variant(tmp_path, ("from perforatedai import utils_perforatedai as UPA\n",
                                "from perforatedai import utils_perforatedai as UPA\n\n\ndef unused(model):\n"
                                "    return UPA.perforate_model(model)\n\n\n"), base=BUILT)
    assert "tracker-without-perforate-model" not in {f.id for f in check_script(script).findings}


def test_the_doctor_page_lists_the_finding():
    page = docs_page("users/doctor.md")
    row = next(line for line in page.splitlines() if line.startswith("| `tracker-without-perforate-model` |"))
    assert "FileNotFoundError" in row and "AttributeError" in row and "set_save_name" in row
