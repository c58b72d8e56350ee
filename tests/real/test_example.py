"""Tier 3: the real perforatedai example through pai-launch, init -> restructures -> complete."""

import json
import os
import subprocess
import sys

import psutil
import pytest

from tests.helpers import REPO, is_live, json_events

pytestmark = [pytest.mark.torch, pytest.mark.proc]

EXAMPLE = REPO / "examples" / "train_pai_ddp.py"


def run_pai_launch(tmp_path, *args, timeout):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "pai_launch", "--log-format", "json", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    seen: set[psutil.Process] = set()
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                try:
                    seen.update(psutil.Process(proc.pid).children(recursive=True))
                except psutil.Error:
                    pass
                timeout -= 0.5
                if timeout <= 0:
                    raise
    finally:
        if proc.poll() is None:
            proc.kill()
    events = json_events(err)
    left = [p for p in seen if is_live(p)]
    return proc.returncode, out, err, events, seen, left


@pytest.mark.timeout(300)
def test_real_perforatedai_example_runs_to_completion_over_several_generations(tmp_path):
    code, out, err, events, seen, left = run_pai_launch(tmp_path, "--nproc", "2", str(EXAMPLE), timeout=280)
    assert code == 0, err[-4000:]
    save = tmp_path / "PAI"
    assert (save / ".training_complete").is_file()
    switches = sorted(p.name for p in save.glob("switch_*.pt"))
    assert len(switches) >= 2, switches
    generations = [e for e in events if e["event"] == "generation_started"]
    assert len(generations) >= 3, [e["event"] for e in events]
    assert [e["load_folder"] for e in generations[1:]] == ["PAI"] * (len(generations) - 1)
    assert any(e["event"] == "init_exited" for e in events)
    assert sum(e["event"] == "dendrites_added" for e in events) >= 2
    assert events[-1]["event"] == "run_finished" and events[-1]["exit_code"] == 0
    # Every generation's workers really trained: both ranks report epochs, and each generation ended on purpose.
    progress = [json.loads(line.split("PAI_EXAMPLE ", 1)[1]) for line in out.splitlines() if "PAI_EXAMPLE " in line]
    exits = [p for p in progress if p["event"] in ("restructure_exit", "complete_exit")]
    assert {(p["gen"], p["rank"]) for p in exits} >= {(str(g), r) for g in range(1, len(generations) + 1) for r in (0, 1)}
    assert [p["event"] for p in exits if p["rank"] == 0][-1] == "complete_exit"
    assert len(seen) >= 3 and left == []


@pytest.mark.timeout(200)
def test_real_example_in_data_parallel_mode(tmp_path):
    code, out, err, events, seen, left = run_pai_launch(tmp_path, "--data-parallel", str(EXAMPLE), timeout=180)
    assert code == 0, err[-4000:]
    assert (tmp_path / "PAI" / ".training_complete").is_file()
    assert len(list((tmp_path / "PAI").glob("switch_*.pt"))) >= 2
    assert not any(e["event"] == "generation_started" for e in events)
    assert [e["event"] for e in events if e["event"] in ("init_started", "training_started")] == ["init_started", "training_started"]
    assert left == []
