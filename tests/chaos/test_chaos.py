"""Every chaos scenario (chaos_scenarios.SCENARIOS) as a pytest test, on the fake trainer wherever it can run.

scripts/chaos.py runs the same scenarios, on the real PerforatedAI example where they can use it, and
prints them as a table. A test fails with the scenario's report: its outcome, the problems found, the
processes left and the files lost, and where its pai-launch output was kept.
"""

from __future__ import annotations

import shutil

import pytest

from tests.chaos.chaos_scenarios import FAKE, REAL, SCENARIOS, UNSHARE, execute, slug


def _params():
    for scenario in SCENARIOS:
        trainer = scenario.trainer_for(prefer_real=False)
        marks = [pytest.mark.proc, pytest.mark.timeout(scenario.timeout(trainer) + 30)]
        if trainer == REAL or scenario.torch:
            marks.append(pytest.mark.torch)
        if scenario.body.__name__.startswith("pid1") and shutil.which(UNSHARE[0]) is None:
            marks.append(pytest.mark.skip(reason="needs util-linux unshare"))
        yield pytest.param(scenario, trainer, id=f"{slug(scenario.name)}-{trainer}", marks=marks)


@pytest.mark.parametrize("scenario, trainer", list(_params()))
def test_chaos_scenario(scenario, trainer, tmp_path):
    result = execute(scenario, trainer, tmp_path)
    if result.skipped:
        pytest.skip(result.outcome)
    assert result.ok, result.report()
    assert trainer in (FAKE, REAL, "none")
