"""What doctor's model of PerforatedAI's tracker says, held to the installed perforatedai: the modules it re-exports,
the tracker's methods, and what a tracker built without UPA.perforate_model really does at its first use (the message
of tracker-without-perforate-model)."""

import json
import os
import subprocess
import sys

import pytest

from pai_launch.doctor.diagnose import check_script
from tests.helpers import REPO

pytestmark = pytest.mark.timeout(180)

ENV = {**os.environ, "PYTHONPATH": str(REPO / "supervisor") + os.pathsep + str(REPO)}

CHECK_MODEL = """
import importlib, json, sys
from pai_launch.doctor import api
wrong = [(m, a) for m, aliases in api.RE_EXPORTS.items() for a, t in aliases.items()
         if getattr(importlib.import_module(m), a) is not importlib.import_module(t)]
tracker = importlib.import_module(api.TRACKER_MODULE).PAINeuronModuleTracker
missing = sorted(m for m in api.TRACKER_MEMBERS - {"member_vars", "save_name"} if not hasattr(tracker, m))
print("RESULT " + json.dumps({"wrong": wrong, "missing": missing}))
"""


def test_the_re_exports_and_tracker_methods_are_the_installed_perforatedai():
    done = subprocess.run([sys.executable, "-c", CHECK_MODEL], env=ENV, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    assert json.loads(line[len("RESULT "):]) == {"wrong": [], "missing": []}, done.stderr


SCRIPT = """import torch
import torch.nn as nn
from perforatedai import globals_perforatedai as GPA
from perforatedai import tracker_perforatedai as TPA

GPA.pc.set_configuration_confirmed(True)
GPA.pc.set_unwrapped_modules_confirmed(True)
GPA.pc.set_weight_decay_accepted(True)
GPA.pc.set_testing_dendrite_capacity(False)
{name}{build}
model = tracker.initialize(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), save_name="SAVEX")
tracker.set_optimizer(torch.optim.SGD)
optimizer, scheduler = tracker.setup_optimizer(model, {{"params": model.parameters(), "lr": 0.1}}, {{}})
nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 2, (4,))).backward()
optimizer.step()
tracker.add_validation_score(0.5, model)
print("SCORED")
"""
STORED = 'GPA.pai_tracker = TPA.PAINeuronModuleTracker(doing_pai=True, save_name="SAVEX")\ntracker = GPA.pai_tracker'
LOCAL = 'tracker = TPA.PAINeuronModuleTracker(doing_pai=True, save_name="SAVEX")'
NAMED = 'GPA.pc.set_save_name("SAVEX")\n'


@pytest.mark.parametrize("name, build, error", [
    ("", STORED, "FileNotFoundError: [Errno 2] No such file or directory: ''"),
    ("", LOCAL, "AttributeError: 'list' object has no attribute"),
    (NAMED, STORED, None),
], ids=["stored-unnamed", "not-stored", "save-name-set"])
def test_a_tracker_built_directly_fails_as_doctor_says(tmp_path, name, build, error):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(name=name, build=build))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=150, stdin=subprocess.DEVNULL)
    findings = [f for f in check_script(script).findings if f.id == "tracker-without-perforate-model"]
    if error is None:
        assert done.returncode == 0 and "SCORED" in done.stdout, done.stderr[-2000:]
        assert findings == []
        return
    assert done.returncode != 0 and "SCORED" not in done.stdout
    assert error in done.stderr, done.stderr[-2000:]
    assert [(f.severity, f.line) for f in findings] == [("error", SCRIPT.format(name=name, build=build)
                                                         .splitlines().index(build.splitlines()[0]) + 1)]
    assert error in findings[0].message


def test_the_installed_perforatedai_accepts_weight_decay_without_being_told():
    """Why doctor has no weight-decay prompt check: the setting that would stop in pdb is on by default."""
    done = subprocess.run([sys.executable, "-c", "from perforatedai import globals_perforatedai as GPA\n"
                           "print('ACCEPTED', GPA.pc.get_weight_decay_accepted())"],
                          env=ENV, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "ACCEPTED True" in done.stdout, done.stdout + done.stderr
