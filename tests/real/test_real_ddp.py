"""Tier 3: real torch DDP workers (gloo on CPU) under pai-launch."""

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import REPO, is_live, json_events, run_pai_launch, start_pai_launch, wait_until

HERE = Path(__file__).parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.mark.timeout(180)
def test_two_generations_of_real_gloo_ddp_workers(tmp_path):
    launch, _ = run_pai_launch(["--log-format", "json", "--nproc", "2", str(HERE / "ddp_allreduce.py")], cwd=tmp_path,
                               env=_env(), timeout=170)
    assert launch.popen.returncode == 0, launch.stderr[-3000:]
    events = launch.events()
    started = [e for e in events if e["event"] == "generation_started"]
    assert [e["generation"] for e in started] == [1, 2]
    assert started[0]["load_folder"] is None and started[1]["load_folder"] == "PAI"
    results = {p.name: json.loads(p.read_text()) for p in (tmp_path / "results").glob("gen*-rank*.json")}
    assert sorted(results) == ["gen1-rank0.json", "gen1-rank1.json", "gen2-rank0.json", "gen2-rank1.json"]
    assert all(r["sum"] == 3.0 and r["world"] == 2 for r in results.values())
    assert {r["run_id"] for r in results.values()} == {events[0]["run_id"]}
    assert results["gen2-rank0.json"]["load"] == "PAI" and results["gen1-rank0.json"]["load"] is None
    # DDP kept the ranks in step: both ranks hold the same weights after the synchronised update.
    assert results["gen1-rank0.json"]["weight"] == results["gen1-rank1.json"]["weight"]
    assert (tmp_path / "PAI" / ".training_complete").exists()


@pytest.mark.timeout(120)
def test_sigterm_during_collectives_stops_every_worker_within_grace(tmp_path):
    launch = start_pai_launch(["--log-format", "json", "--nproc", "2", "--grace", "10", str(HERE / "ddp_allreduce.py"),
                               "--spin"], cwd=tmp_path, io_dir=tmp_path.parent / f"{tmp_path.name}.io", env=_env())
    try:
        wait_until(lambda: (tmp_path / "results" / "spinning").exists() or launch.popen.poll() is not None, 100,
                   interval=0.05, message="workers in all_reduce")
        assert launch.popen.poll() is None, launch.stderr[-3000:]
        tree = psutil.Process(launch.pid).children(recursive=True)
        assert len(tree) >= 3  # the agent and two workers at least
        sent = launch.send(signal.SIGTERM)
        returncode = launch.wait(30)
        elapsed = time.monotonic() - sent
    finally:
        launch.kill()
    err = launch.stderr
    assert returncode == 143, err[-3000:]
    assert elapsed < 10 + 2, f"pai-launch took {elapsed:.1f} s to stop with --grace 10"
    survivors = [p for p in tree if is_live(p)]
    assert survivors == []
    finished = json_events(err, "run_finished")
    assert finished and finished[0]["reason"] == "stopped by SIGTERM"
