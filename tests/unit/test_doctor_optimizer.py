"""doctor: optimizer-not-from-tracker asks where the tracker's optimizer comes from only in a project that uses
PerforatedAI's 3.x tracker (not one written for 1.x, one with a tracker class perforatedai does not have, or one with
no tracker), and names the plain optimizer that runs, not a baseline branch's. Scripts are read with ast, never
run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_launch.doctor.diagnose import check_script, render_text

pytestmark = pytest.mark.timeout(60)

LEGACY = """\
# PerforatedAI's 1.x API: the optimizer comes from its tracker (pbTracker.setupOptimizer).
import argparse
import sys

import torch
import torch.nn as nn
from perforatedai import pb_globals as PBG
from perforatedai import pb_utils as PBU

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
args = parser.parse_args()

model = PBU.initializePB(nn.Linear(8, 2))
PBG.pbTracker.setOptimizer(torch.optim.Adam)
optimizer, scheduler = PBG.pbTracker.setupOptimizer(model, {"params": model.parameters(), "lr": 0.1}, {})
for x, y in [(torch.randn(4, 8), torch.randint(0, 2, (4,)))]:
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    if args.perforate_model_parallel:
        PBG.pbTracker.saveTrackerSettings()
        sys.exit(0)
    optimizer.step()
"""

INVENTED = """\
# A tracker class perforatedai does not have, and a plain AdamW where perforatedai is not installed.
import argparse
import sys

import torch
import torch.nn as nn

try:
    import perforatedai as PA
    DENDRITIC_AVAILABLE = True
except ImportError:
    DENDRITIC_AVAILABLE = False

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
args = parser.parse_args()


def train(model):
    if not DENDRITIC_AVAILABLE:
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
        return optimizer
    tracker = PA.PerforatedBackPropagationTracker(do_pb=True, save_name="classifier")
    tracker.setup_optimizer(torch.optim.AdamW, torch.optim.lr_scheduler.StepLR, lr=2e-5, step_size=10)
    return tracker.optimizer


train(nn.Linear(8, 2))
"""

FALLBACK = """\
# The tracker's optimizer through 1.x method names on the 3.x tracker: they fail, the except swallows it and the
# fallback AdamW at the end is the one that runs; the one under `if not PAI_AVAILABLE or not use_pai:` is the
# baseline's.
import argparse
import sys

import torch
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA

PAI_AVAILABLE = True
parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
parser.add_argument("--no-dendrites", action="store_true")
args = parser.parse_args()


def setup_perforated_optimizer(model, use_pai=True):
    if not PAI_AVAILABLE or not use_pai:
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
        return optimizer
    try:
        GPA.pai_tracker.setOptimizer(torch.optim.AdamW)
        return GPA.pai_tracker.getOptimizer(model.parameters(), lr=2e-5)
    except Exception as e:
        print(f"falling back: {e}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    return optimizer


GPA.pc.set_configuration_confirmed(True)
GPA.pc.set_unwrapped_modules_confirmed(True)
GPA.pc.set_weight_decay_accepted(True)
model = UPA.perforate_model(nn.Linear(8, 2))
optimizer = setup_perforated_optimizer(model, use_pai=not args.no_dendrites)
for x, y in [(torch.randn(4, 8), torch.randint(0, 2, (4,)))]:
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    if args.perforate_model_parallel:
        GPA.pai_tracker.save_tracker_settings()
        sys.exit(0)
    optimizer.step()
"""


def found(folder: Path, text: str, *changes: tuple[str, str]) -> tuple[Path, list[tuple[str, str, int | None]]]:
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    script = folder / "train.py"
    script.write_text(text)
    report = check_script(script)
    return script, [(f.id, f.severity, f.line) for f in report.findings]


def line_of(path: Path, text: str, nth: int = 1) -> int:
    return [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line][nth - 1]


def test_a_1x_project_gets_the_legacy_finding_not_a_claim_about_its_optimizer(tmp_path):
    script, findings = found(tmp_path, LEGACY)
    assert findings == [("init-settings-not-saved", "error", None),
                        ("perforatedai-legacy-api", "error", line_of(script, "import pb_globals"))]


def test_a_1x_project_with_a_plain_optimizer_is_not_read_either(tmp_path):
    """doctor has no names for 1.x's tracker: porting (the legacy finding) is where the optimizer moves."""
    script, findings = found(tmp_path, LEGACY, ("PBG.pbTracker.setOptimizer(torch.optim.Adam)\n", ""), (
        "optimizer, scheduler = PBG.pbTracker.setupOptimizer(model, {\"params\": model.parameters(), \"lr\": 0.1}, {})",
        "optimizer = torch.optim.Adam(model.parameters(), lr=0.1)"))
    assert [f[0] for f in findings] == ["init-settings-not-saved", "perforatedai-legacy-api"]


def test_a_tracker_class_perforatedai_does_not_have_asks_for_no_tracker_optimizer(tmp_path):
    script, findings = found(tmp_path, INVENTED)
    assert findings == [("init-settings-not-saved", "error", None),  # and the invented class is no name perforatedai
    # has
                        ("perforatedai-api-missing", "error", line_of(script, "PA.PerforatedBackPropagationTracker("))]


def test_the_fallback_optimizer_that_runs_is_named_not_the_baseline_branchs(tmp_path):
    script, findings = found(tmp_path, FALLBACK)
    assert findings == [("validation-score-missing", "error", None),  # it never scores either
                        ("perforatedai-api-missing", "warning", line_of(script, "setOptimizer(")),  # 1.x names, in a
                        # try
                        ("optimizer-not-from-tracker", "error", line_of(script, "optimizer = torch.optim.AdamW(", 2))
                        ], render_text(check_script(script))


def test_without_a_fallback_the_only_plain_optimizer_is_named(tmp_path):
    script, findings = found(tmp_path, FALLBACK, (
        "    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)\n    return optimizer\n\n",
        "    raise RuntimeError(\"no tracker optimizer\")\n\n"))
    assert findings == [("validation-score-missing", "error", None),
                        ("optimizer-not-from-tracker", "error", line_of(script, "optimizer = torch.optim.AdamW(")),
                        ("perforatedai-api-missing", "warning", line_of(script, "setOptimizer("))]
