"""Tier 3: pai_launch.training with the real perforatedai in a real 2-rank gloo run under pai-launch."""

import json
import os
from pathlib import Path

import pytest

from tests.helpers import REPO, run_pai_launch

SCRIPT = Path(__file__).parent / "torn_switch_script.py"


@pytest.mark.timeout(240)
def test_load_newest_skips_a_torn_newest_switch_file_for_the_previous_one(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc, _ = run_pai_launch(["--log-format", "json", "--nproc", "2", str(SCRIPT)], cwd=tmp_path, env=env, timeout=220)
    assert proc.popen.returncode == 0, proc.stderr[-4000:] + proc.stdout[-4000:]
    assert [e["load_folder"] for e in proc.events("generation_started")] == [None, "PAI"]
    results = [json.loads((tmp_path / "results" / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    real = results[0]["real"]
    torn = f"switch_{int(real[len('switch_'):]) + 2}.pt"
    assert (tmp_path / "PAI" / torn).stat().st_size < (tmp_path / "PAI" / f"{real}.pt").stat().st_size
    for result in results:
        assert result["world"] == 2 and result["real"] == real and result["newest"] == real
        assert result["tensors"] and result["restored"] == result["tensors"], result  # switch_N's weights, on each rank
    assert f"[rank0]: Skipped incomplete {torn} in PAI" in proc.stdout
    assert f"[rank0]: Loaded PAI state from PAI/{real}.pt" in proc.stdout
    assert "[rank1]: Loaded PAI state" not in proc.stdout  # rank 0 speaks for the run
    assert (tmp_path / "PAI" / ".training_complete").read_text() == "complete\n"
