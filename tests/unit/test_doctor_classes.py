"""pai-launch doctor on scripts whose PerforatedAI calls live in a trainer class (doctor.classes): `Trainer(args)`
walks __init__ there, `trainer.fit()` / `self.wrap()` / `super().__init__()` walk the method there, `self.X = ...`
is read back as what it holds, and methods nothing calls (a framework's hooks) are walked detached."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pai_launch.doctor import classes
from pai_launch.doctor.budget import Deadline
from pai_launch.doctor.diagnose import check_script, render_text
from pai_launch.doctor.project import Project
from pai_launch.doctor.walker import walk

pytestmark = pytest.mark.timeout(60)

CLASS = Path(__file__).resolve().parents[1] / "doctor_scripts" / "projects" / "tracker_class" / "train.py"
MAIN = "    Trainer(parse()).fit()"
SCORE_NET = "lambda: self.tracker.add_validation_score(0.5, self.net))"
SCORE_MODEL = "lambda: self.tracker.add_validation_score(0.5, self.model))"
BEFORE_MAIN = "\n\nif __name__"


def variant(folder: Path, *changes: tuple[str, str], name: str = "train.py") -> Path:
    """The class script with each (old, new) text replaced, as FOLDER/NAME."""
    text = CLASS.read_text()
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / name
    path.write_text(text)
    return path


def found(script: Path) -> list[tuple[str, str, int | None]]:
    report = check_script(script)
    return [(f.id, f.severity, f.line) for f in report.findings]


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


#: the ways a script makes the trainer and calls its fit()
SPELLINGS = {
    "in-place": [],
    "named": [(MAIN, "    trainer = Trainer(parse())\n    trainer.fit()")],
    "builder": [(BEFORE_MAIN, "\n\ndef build(args):\n    trainer = Trainer(args)\n    return trainer\n" + BEFORE_MAIN),
                (MAIN, "    trainer = build(parse())\n    trainer.fit()")],
    "classmethod": [("    def in_turn(self, fn):", ("    @classmethod\n    def from_args(cls, args):\n"
                                                  "        return cls(args)\n\n    def in_turn(self, fn):")),
                    (MAIN, "    trainer = Trainer.from_args(parse())\n    trainer.fit()")],
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_a_correct_trainer_class_has_no_findings(tmp_path, spelling):
    script = variant(tmp_path, *SPELLINGS[spelling])
    report = check_script(script)
    assert report.findings == () and report.unresolved == (), render_text(report)


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_the_ddp_wrapper_a_method_stored_in_self_reaches_the_score_in_another(tmp_path, spelling):
    """wrap() sets self.model = DistributedDataParallel(...) under `if self.distributed`; fit() scores self.model."""
    script = variant(tmp_path, (SCORE_NET, SCORE_MODEL), *SPELLINGS[spelling])
    assert found(script) == [("validation-score-wrapped-model", "error", line_of(script, SCORE_MODEL))]


def test_an_attribute_is_read_as_it_was_at_the_call(tmp_path):
    """The score runs before wrap() sets the wrapper: self.model is still the model there."""
    script = variant(tmp_path, (SCORE_NET, SCORE_MODEL), ("        self.wrap()\n        while True:",
                                                          "        while True:"),
                     (MAIN, "    trainer = Trainer(parse())\n    trainer.fit()\n    trainer.wrap()"))
    assert found(script) == []


def test_perforate_model_in_init_not_in_turn(tmp_path):
    script = variant(tmp_path, ("self.in_turn(lambda: UPA.perforate_model(nn.Linear(8, 2), save_name=args.save))",
                                "UPA.perforate_model(nn.Linear(8, 2), save_name=args.save)"))
    assert found(script) == [("perforate-model-race", "error", line_of(script, "UPA.perforate_model("))]


def test_prompts_set_in_init_count_and_one_missing_there_is_an_error(tmp_path):
    script = variant(tmp_path, ("        GPA.pc.set_configuration_confirmed(True)\n", ""))
    assert found(script) == [("prompt-configuration-confirmed", "error", None)]


def test_a_tracker_method_missing_from_perforatedai_through_self_tracker(tmp_path):
    script = variant(tmp_path, ("self.tracker.set_optimizer(torch.optim.SGD)",
                                "self.tracker.set_optimiser(torch.optim.SGD)"))
    assert found(script) == [("perforatedai-api-missing", "error", line_of(script, "set_optimiser("))]


SUBCLASS = ("\n\nclass PlainTrainer(Trainer):\n    def __init__(self, args):\n        super().__init__(args)\n"
            "        self.name = 'plain'\n\n    def wrap(self):\n{wrap}" + BEFORE_MAIN)


def test_a_subclass_overriding_a_method_is_walked_in_its_place(tmp_path):
    wrap = "        if self.distributed:\n            self.model = nn.parallel.DistributedDataParallel(self.net)\n"
    script = variant(tmp_path, (BEFORE_MAIN, SUBCLASS.format(wrap=wrap)), (MAIN, "    PlainTrainer(parse()).fit()"))
    line = line_of(script, "DistributedDataParallel(self.net)")
    assert found(script) == [("ddp-find-unused-parameters", "error", line), ("ddp-broadcast-buffers", "error", line)]


def test_super_reaches_the_base_classs_method(tmp_path):
    wrap = "        super().wrap()\n        self.wrapped = True\n"
    script = variant(tmp_path, (BEFORE_MAIN, SUBCLASS.format(wrap=wrap)), (SCORE_NET, SCORE_MODEL),
                     (MAIN, "    PlainTrainer(parse()).fit()"))
    assert found(script) == [("validation-score-wrapped-model", "error", line_of(script, SCORE_MODEL))]


def test_a_trainer_class_in_another_file_of_the_project(tmp_path):
    trainer = variant(tmp_path, (SCORE_NET, SCORE_MODEL), (BEFORE_MAIN + ' == "__main__":\n' + MAIN + "\n", "\n"),
                      name="trainer.py")
    script = tmp_path / "train.py"
    script.write_text("from perforatedai.utils_perforatedai import GPA\nfrom trainer import Trainer, parse\n\n"
                      "Trainer(parse()).fit()\n")
    report = check_script(script)
    assert [(f.id, f.severity, f.path, f.line) for f in report.findings] == [
        ("validation-score-wrapped-model", "error", str(trainer), line_of(trainer, SCORE_MODEL))], render_text(report)


def test_a_method_nothing_calls_is_walked_detached_and_makes_warnings(tmp_path):
    """A framework hook (Lightning's on_validation_epoch_end): it may run, nothing says when."""
    hook = "    def on_validation_epoch_end(self):\n        self.tracker.add_validation_score(0.5, self.model)\n\n"
    script = variant(tmp_path, ("    def fit(self):", hook + "    def fit(self):"))
    line = line_of(script, "self.tracker.add_validation_score(0.5, self.model)")
    assert found(script) == [("validation-score-wrapped-model", "warning", line),
                             ("validation-score-race", "warning", line)]


def test_a_trainer_made_by_code_doctor_cannot_see_is_walked_detached(tmp_path):
    """`registry.make(Trainer, ...)`: the call on it is not followed (an unknown receiver); its methods are walked on
    their own, on an instance of their class, so self.in_turn(...) and self.tracker still read right."""
    script = variant(tmp_path, ("import sys\n", "import sys\n\nimport registry\n"),
                     (MAIN, "    trainer = registry.make(Trainer, parse())\n    trainer.fit()"))
    assert found(script) == []
    flow = walk(Project(script))
    scores = [e for e in flow.events if e.kind == "call" and (e.name or "").endswith("add_validation_score")]
    assert scores and all(e.detached for e in scores)
    assert [e.name for e in flow.events if e.name == "Trainer.fit"] == []


def test_an_instances_attribute_is_its_own_not_any_objects_of_that_name(tmp_path):
    """Logger().tracker is a list: its add_extra_score is not the tracker's, though Trainer's self.tracker is."""
    logger = ("\n\nclass Logger:\n    def __init__(self):\n        self.tracker = []\n\n    def log(self):\n"
              "        self.tracker.add_extra_score(1, 'x')\n" + BEFORE_MAIN)
    script = variant(tmp_path, (BEFORE_MAIN, logger), (MAIN, MAIN + "\n    Logger().log()"))
    flow = walk(Project(script))
    names = {e.line: e.name for e in flow.events if e.kind == "call"}
    assert names[line_of(script, "self.tracker.add_extra_score")] == "self.tracker.add_extra_score"
    assert names[line_of(script, "self.tracker.save_tracker_settings")] == \
        "perforatedai.globals_perforatedai.pai_tracker.save_tracker_settings"


def test_methods_calling_each_other_stay_bounded(tmp_path):
    methods = "".join(f"    def m{i}(self):\n" + "".join(f"        self.m{j}()\n" for j in range(16) if j != i)
                      + "\n" for i in range(16))
    methods += "    def ping(self):\n        return self.pong()\n\n    def pong(self):\n        return self.ping()\n\n"
    script = variant(tmp_path, ("    def fit(self):", methods + "    def fit(self):\n        self.m0()\n"
                                "        self.ping()"))
    report = check_script(script, deadline=Deadline(30))
    assert report.findings == (), render_text(report)
    flow = walk(Project(script))
    walked = [e for e in flow.events if e.kind == "call" and e.name == "Trainer.m1"]
    calls_of_m1 = sum(isinstance(n, ast.Call) and ast.unparse(n.func) == "self.m1"
                      for n in ast.walk(ast.parse(script.read_text())))
    assert len(walked) <= classes.MAX_ENTRIES * calls_of_m1


def test_classes_that_make_themselves_inherit_in_a_cycle_or_hold_each_other_stay_bounded(tmp_path):
    odd = ("\n\nclass Loop(Cycle):\n    def __init__(self):\n        self.child = Loop()\n        self.a = self.b\n"
           "        self.b = self.a\n        self.a.set_optimizer(self.b)\n        self.go()\n\n\n"
           "class Cycle(Loop):\n    def go(self):\n        super().go()\n        Cycle().go()\n" + BEFORE_MAIN)
    script = variant(tmp_path, (BEFORE_MAIN, odd), (MAIN, MAIN + "\n    Loop().go()"))
    report = check_script(script, deadline=Deadline(30))
    assert report.findings == (), render_text(report)


LIGHTNING = '''import argparse

import pytorch_lightning as pl
import torch
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import utils_perforatedai as UPA

parser = argparse.ArgumentParser()
parser.add_argument("--perforate_model_parallel", action="store_true")
parser.add_argument("--pai_load_folder", default=None)
args = parser.parse_args()
GPA.pc.set_configuration_confirmed(True)
GPA.pc.set_unwrapped_modules_confirmed(True)


class LitModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = UPA.initialize_pai(nn.Linear(8, 2))

    def on_validation_epoch_end(self):
        self.model, restructured, complete = GPA.pai_tracker.add_validation_score(0.5, self.model)

    def configure_optimizers(self):
        GPA.pai_tracker.set_optimizer(torch.optim.Adam)
        optimizer, _ = GPA.pai_tracker.setup_optimizer(self.model, {"params": self.model.parameters()}, {})
        return optimizer


pl.Trainer(devices=1).fit(LitModel())
'''


def test_a_lightning_module_init_is_walked_where_it_is_made_and_its_hooks_detached(tmp_path):
    """__init__'s initialize_pai (gone in 3.x) is an error where LitModel() stands; configure_optimizers, which only
    Lightning calls, still counts as building the optimizer through the tracker (no optimizer-not-from-tracker)."""
    script = tmp_path / "train.py"
    script.write_text(LIGHTNING)
    assert found(script) == [("init-settings-not-saved", "error", None),
                             ("initialize-pai-removed", "error", line_of(script, "UPA.initialize_pai("))]
