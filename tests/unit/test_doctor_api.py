"""doctor: calls into PerforatedAI by a name the installed release lacks (perforatedai-api-missing), read from its
files or the bundled list of 3.2.9's names without importing it, and "(N more calls)" counting places in the code."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from pai_launch.doctor import pai_api
from pai_launch.doctor.checks_api_missing import lookup
from pai_launch.doctor.diagnose import check_script, render_text

pytestmark = pytest.mark.timeout(60)

GOOD = Path(__file__).resolve().parents[2] / "tests" / "doctor_scripts" / "good" / "minimal_ddp.py"
PROMPTS = "GPA.pc.set_weight_decay_accepted(True)\n"


def variant(folder: Path, *changes: tuple[str, str]) -> Path:
    text = GOOD.read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / "train.py"
    path.write_text(text)
    return path


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_the_bundled_names_are_3_2_9s():
    api = pai_api.bundled()
    assert (api.version, api.how) == ("3.2.9", "bundled")
    assert {"set_save_name", "set_configuration_confirmed", "set_testing_dendrite_capacity"} <= api.pc
    assert "set_when_to_switch_mode" not in api.pc
    assert {"add_validation_score", "save_tracker_settings", "setup_optimizer", "set_optimizer"} <= api.tracker
    assert {"perforate_model", "load_system"} <= api.utils and "initialize_dendrites" not in api.utils
    assert "not installed" in api.described() and "3.2.9" in api.described()
    assert pai_api.bundled("3.2.9").described() == "perforatedai 3.2.9 (installed)"
    assert "the installed 3.3.0 has no Python source" in pai_api.bundled("3.3.0").described()


@pytest.mark.parametrize("name, missing", [
    ("perforatedai.globals_perforatedai.pc.set_when_to_switch_mode", ("GPA.pc.set_when_to_switch_mode",
                                                                      "set_when_to_switch_mode")),
    ("perforatedai.globals_perforatedai.pc.set_save_name", None),
    ("perforatedai.globals_perforatedai.pai_tracker.add_validation_score", None),
    ("perforatedai.globals_perforatedai.pai_tracker.add_score", ("GPA.pai_tracker.add_score", "add_score")),
    ("perforatedai.utils_perforatedai.perforate_model", None),
    ("perforatedai.utils_perforatedai.initialize_pai", None),  # initialize-pai-removed names it
    ("perforatedai.utils_perforatedai.initialize_dendrites", None),  # and initialize-dendrites this one
    ("perforatedai.utils_perforatedai.convert_network_pb", ("UPA.convert_network_pb", "convert_network_pb")),
    ("perforatedai.globals_perforatedai.pai_tracker.member_vars.get", None),  # an attribute's method
    ("perforatedai.convert_network", ("perforatedai.convert_network", "convert_network")),
    ("perforatedai.utils_perforatedai", None),  # a module of the package
    ("torch.nn.Linear", None),
])
def test_lookup(name, missing):
    assert lookup(name, pai_api.bundled()) == missing


def test_a_setting_3_2_9_lacks_is_a_warning_a_missing_method_an_error(tmp_path):
    script = variant(tmp_path, (PROMPTS, PROMPTS + "GPA.pc.set_when_to_switch_mode(GPA.pc.DOING_FIXED_SWITCH)\n"),
                     ("GPA.pai_tracker.set_optimizer(torch.optim.SGD)\n",
                      ("GPA.pai_tracker.set_optimizer(torch.optim.SGD)\nGPA.pai_tracker.set_n_epochs(3)\n"
                      "if args.save:\n    UPA.convert_network_pb(model)\n")))
    report = check_script(script)
    found = {(f.id, f.severity, f.line) for f in report.findings}
    assert found == {("perforatedai-api-missing", "warning", line_of(script, "set_when_to_switch_mode")),
                     ("perforatedai-api-missing", "error", line_of(script, "set_n_epochs")),
                     ("perforatedai-api-missing", "warning", line_of(script, "convert_network_pb"))}, \
        render_text(report)
    setting = next(f for f in report.findings if "set_when_to_switch_mode" in f.message)
    assert setting.message.startswith("GPA.pc.set_when_to_switch_mode is not in perforatedai 3.2.9")
    assert "Ignoring set attempt" in setting.message
    method = next(f for f in report.findings if "set_n_epochs" in f.message)
    assert "raises AttributeError" in method.message and "more call" not in method.message


HELPER = "def switch_by_hand():\n    GPA.pc.set_when_to_switch_mode(1)\n\n\n"


@pytest.mark.parametrize("calls, more", [
    ("switch_by_hand()\nswitch_by_hand()\nswitch_by_hand()\n", ""),  # one place, three paths
    ("switch_by_hand()\nGPA.pc.set_when_to_switch_mode(2)\n", " (1 more call in the project)"),
    ("switch_by_hand()\nGPA.pc.set_when_to_switch_mode(2)\nGPA.pc.set_when_to_switch_mode(3)\n",
     " (2 more calls in the project)"),
], ids=["one-site-three-paths", "two-sites", "three-sites"])
def test_more_calls_counts_places_in_the_code_not_paths(tmp_path, calls, more):
    script = variant(tmp_path, (PROMPTS, PROMPTS + HELPER + calls))
    (finding,) = check_script(script).findings
    assert finding.message.endswith("without it" + more), finding.message


def test_initialize_pai_counts_places_too(tmp_path):
    helper = "def start(net):\n    return UPA.initialize_pai(net)\n\n\n"
    script = variant(tmp_path, (PROMPTS, PROMPTS + helper + "start(model)\nstart(model)\nstart(model)\n"))
    report = check_script(script)
    assert [f.message.endswith("AttributeError") for f in report.findings if f.id == "initialize-pai-removed"] == [
        True], render_text(report)


@pytest.mark.parametrize("guarded", [
    'if hasattr(GPA.pai_tracker, "set_n_epochs"):\n    GPA.pai_tracker.set_n_epochs(1)\n',
    'if hasattr(UPA, "convert_network_pb"):\n    UPA.convert_network_pb(model)\nelse:\n    pass\n',
], ids=["hasattr-tracker", "hasattr-utils"])
def test_a_call_the_script_asks_for_first_is_not_reported(tmp_path, guarded):
    script = variant(tmp_path, (PROMPTS, PROMPTS + guarded))
    assert check_script(script).findings == ()


@pytest.mark.parametrize("guarded", [
    'if hasattr(GPA.pc, "set_when_to_switch_mode"):\n    GPA.pc.set_when_to_switch_mode(1)\n',
    "try:\n    GPA.pc.set_when_to_switch_mode(1)\nexcept AttributeError:\n    pass\n",
    'if hasattr(GPA.pc, "append_modules_to_convert"):\n    GPA.pc.append_modules_to_convert([nn.Linear])\n',
], ids=["hasattr-set", "try-set", "hasattr-append"])
def test_a_setting_3_2_9_answers_for_any_name_is_not_guarded_by_hasattr_or_try(tmp_path, guarded):
    """3.2.9's GPA.pc answers any set_/append_ with a no-op: hasattr is True and nothing raises, so the call runs and
    the setting is dropped."""
    script = variant(tmp_path, (PROMPTS, PROMPTS + guarded))
    report = check_script(script)
    line = line_of(script, "    GPA.pc.")
    assert [(f.id, f.severity, f.line) for f in report.findings] == [
        ("perforatedai-api-missing", "warning", line)], render_text(report)
    assert "Ignoring set attempt" in report.findings[0].message


@pytest.mark.parametrize("guarded", [
    "try:\n    GPA.pai_tracker.set_n_epochs(1)\nexcept (ValueError, Exception):\n    pass\n",
    "try:\n    if not hasattr(GPA.pai_tracker, 'set_n_epochs'):\n        raise AttributeError('old')\n"
    "    GPA.pai_tracker.set_n_epochs(1)\nexcept AttributeError:\n    pass\n",
], ids=["try-exception", "hasattr-raise-in-try"])
def test_a_missing_method_in_a_try_that_catches_it_is_a_warning(tmp_path, guarded):
    """It does not crash, but what the try guards never runs with this release."""
    script = variant(tmp_path, (PROMPTS, PROMPTS + guarded))
    report = check_script(script)
    assert [(f.id, f.severity, f.line) for f in report.findings] == [
        ("perforatedai-api-missing", "warning", line_of(script, "    GPA.pai_tracker.set_n_epochs(1)"))], \
        render_text(report)
    assert "the try around it catches" in report.findings[0].message


def test_missing_names_in_one_try_are_one_finding_at_the_first(tmp_path):
    """The first raises and the try is left: the names after it never run, so they are named in that finding."""
    guarded = ("try:\n    GPA.pai_tracker.setOptimizer(torch.optim.SGD)\n    GPA.pai_tracker.setScheduler(None)\n"
               "    optimizer = GPA.pai_tracker.getOptimizer(model.parameters())\nexcept Exception:\n    pass\n")
    script = variant(tmp_path, (PROMPTS, PROMPTS + guarded))
    report = check_script(script)
    assert [(f.id, f.severity, f.line) for f in report.findings] == [
        ("perforatedai-api-missing", "warning", line_of(script, "setOptimizer"))], render_text(report)
    assert "(nor GPA.pai_tracker.setScheduler, GPA.pai_tracker.getOptimizer, also missing, after it)" in \
        report.findings[0].message


@pytest.mark.parametrize("call, expected", [
    ("PA.convert_network(model)\n", "error"),
    ("tracker = PA.PerforatedBackPropagationTracker(do_pb=True)\n", "error"),
    ("try:\n    PA.convert_network(model)\nexcept Exception:\n    pass\n", "warning"),
], ids=["function", "class", "caught"])
def test_a_name_perforatedai_itself_lacks(tmp_path, call, expected):
    """`import perforatedai as PA; PA.convert_network(...)`: 3.2.9's package holds only its modules."""
    script = variant(tmp_path, ("import torch\n", "import perforatedai as PA\nimport torch\n"),
                     (PROMPTS, PROMPTS + call))
    report = check_script(script)
    first = call.splitlines()[0] if expected == "error" else "    PA.convert_network(model)"
    line = script.read_text().splitlines().index(first) + 1
    assert [(f.id, f.severity, f.line) for f in report.findings] == [
        ("perforatedai-api-missing", expected, line)], render_text(report)
    assert report.findings[0].message.startswith("perforatedai.")


def _source_install(folder: Path, settings: int = 12) -> Path:
    package = folder / "perforatedai"
    package.mkdir()
    names = ", ".join(f'"s{n}"' for n in range(settings))
    (package / "globals_perforatedai.py").write_text(
        "class PAIConfig:\n    def __init__(self):\n        self.save_name = 'PAI'\n"
        f"        for k in ({names}):\n            add_var(self, k)\n\n    def load_config(self):\n        pass\n")
    (package / "tracker_perforatedai.py").write_text(
        "class PAINeuronModuleTracker:\n    def add_validation_score(self, score, net):\n        pass\n")
    (package / "utils_perforatedai.py").write_text("import os\n\n\ndef perforate_model(net):\n    return net\n")
    return package


def test_a_source_install_is_read_with_ast(tmp_path):
    api = pai_api.from_sources(_source_install(tmp_path), "9.9")
    assert api is not None and (api.version, api.how) == ("9.9", "installed")
    assert {"set_save_name", "get_save_name", "set_s3", "load_config"} <= api.pc
    assert api.tracker == {"add_validation_score"} and {"perforate_model", "os"} <= api.utils
    assert pai_api.from_sources(tmp_path, "9.9") is None  # no files: the bundled names are used
    (tmp_path / "few").mkdir()
    assert pai_api.from_sources(_source_install(tmp_path / "few", settings=2), "9.9") is None  # not understood


def test_a_source_installs_package_names_and_answered_prefixes_are_read(tmp_path):
    package = _source_install(tmp_path)
    (package / "__init__.py").write_text("VERSION = '9.9'\n")
    config = (package / "globals_perforatedai.py").read_text()
    (package / "globals_perforatedai.py").write_text(config + (
        "\n    def __getattr__(self, name):\n        if name.startswith('set_'):\n            return lambda x: None\n"
        "        if name.startswith('get_') and self.module:\n            return None\n"
        "        raise AttributeError(name)\n"))
    api = pai_api.from_sources(package, "9.9")
    assert api is not None and api.answers == ("set_",)
    assert api.package == {"VERSION", "globals_perforatedai", "tracker_perforatedai", "utils_perforatedai"}
    assert lookup("perforatedai.convert_network", api) == ("perforatedai.convert_network", "convert_network")
    assert pai_api.bundled().answers == ("set_", "append_")


def test_doctor_finds_the_installed_perforatedai_without_importing_it(tmp_path):
    if "perforatedai" in sys.modules:
        pytest.skip("another test imported perforatedai in this process")
    script = variant(tmp_path, (PROMPTS, PROMPTS + "GPA.pc.set_when_to_switch_mode(1)\n"))
    pai_api.api.cache_clear()
    try:
        report = check_script(script)
        described = pai_api.api().described()
    finally:
        pai_api.api.cache_clear()
    assert [f.id for f in report.findings] == ["perforatedai-api-missing"]
    assert "perforatedai" not in sys.modules
    assert described in report.findings[0].message
    try:
        installed = importlib.metadata.version("perforatedai")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed == "3.2.9":  # compiled: the bundled names, which are this version's
        assert described == "perforatedai 3.2.9 (installed)"
    elif installed is None:
        assert "not installed" in described


@pytest.mark.parametrize("installed, how, says", [
    ((None, None), "bundled", "perforatedai is not installed here"),
    (("compiled", "3.3.0"), "bundled", "the installed 3.3.0 has no Python source"),
    (("compiled", "3.2.9"), "installed", "perforatedai 3.2.9 (installed)"),
    (("source", "9.9"), "installed", "perforatedai 9.9 (installed)"),
])
def test_which_names_are_checked_against(tmp_path, monkeypatch, installed, how, says):
    folder, version = installed
    place = {"compiled": tmp_path, "source": _source_install(tmp_path) if folder == "source" else None}.get(folder)
    monkeypatch.setattr(pai_api, "_installed", lambda: (place, version))
    pai_api.api.cache_clear()
    try:
        api = pai_api.api()
    finally:
        pai_api.api.cache_clear()
    assert api.how == how and says in api.described()
