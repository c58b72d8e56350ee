"""validation-score-missing: a perforated model whose tracker is never given a score never adds dendrites and
never completes, so the run is plain training."""

from __future__ import annotations

import pytest

from pai_launch.doctor.diagnose import check_script

pytestmark = pytest.mark.timeout(60)

HEAD = ("import argparse\nimport torch\nfrom perforatedai import globals_perforatedai as GPA\n"
        "from perforatedai import utils_perforatedai as UPA\n"
        "GPA.pc.set_configuration_confirmed(True)\nGPA.pc.set_unwrapped_modules_confirmed(True)\n")
PERFORATE = "model = UPA.perforate_model(torch.nn.Linear(4, 2))\n"


def findings(tmp_path, body: str) -> list[tuple[str, str, int | None]]:
    script = tmp_path / "train.py"
    script.write_text(HEAD + body)
    return [(f.id, f.severity, f.line) for f in check_script(script).findings if f.id == "validation-score-missing"]


def test_a_perforated_model_never_scored_is_an_error(tmp_path):
    assert findings(tmp_path, PERFORATE + "for epoch in range(3):\n    pass\n") == [
        ("validation-score-missing", "error", None)]


def test_a_perforation_under_a_condition_doctor_cannot_read_makes_it_a_warning(tmp_path):
    body = "import os\nif os.environ.get('PAI'):\n    " + PERFORATE
    assert findings(tmp_path, body) == [("validation-score-missing", "warning", None)]


@pytest.mark.parametrize("scoring", [
    "model, restructured, complete = GPA.pai_tracker.add_validation_score(0.5, model)\n",
    "tracker = GPA.pai_tracker\ntracker.add_validation_score(0.5, model)\n",
    # in a nested function nothing calls: doctor cannot say it never runs
    "def evaluate():\n    def inner():\n        return GPA.pai_tracker.add_validation_score(0.5, model)\n"
    "    return inner\n",
    "from pai_launch.training import add_validation_score\nadd_validation_score(run, 0.5, model)\n",
])
def test_any_call_that_may_score_is_enough(tmp_path, scoring):
    assert findings(tmp_path, PERFORATE + scoring) == []


def test_a_scoring_call_in_another_file_of_the_project_is_enough(tmp_path):
    (tmp_path / "helpers.py").write_text("def score(tracker, value, model):\n"
                                         "    return tracker.add_validation_score(value, model)\n")
    assert findings(tmp_path, "import helpers\n" + PERFORATE + "helpers.score(GPA.pai_tracker, 0.5, model)\n") == []


def test_a_script_that_perforates_nothing_is_not_asked_to_score(tmp_path):
    assert findings(tmp_path, "model = torch.nn.Linear(4, 2)\n") == []
