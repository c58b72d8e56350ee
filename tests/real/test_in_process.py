"""Tier 3: --restructure in-process with real perforatedai and gloo DDP: many restructures in one pair of processes,
every rank's parameters identical after each, memory and descriptors flat, and a crash resuming from a switch file."""

import json
import os

import pytest

from tests.helpers import REPO, agent_store, is_live, run_pai_launch

TRAINER = REPO / "tests" / "real" / "in_process_trainer.py"
#: RSS growth allowed over 20+ restructures: the model itself grows (a few KB per dendrite here), and the allocator
#: keeps some; a leaked wrapper, reducer or optimizer per restructure would show as far more. Measured: 3.9 MB for 22.
RSS_GROWTH_LIMIT = 16 * 1024 * 1024


def _run(tmp_path, *trainer_args, timeout=240):
    results = tmp_path / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    launch, seen = run_pai_launch(["--log-format", "json", "--nproc", "2", "--restructure", "in-process", str(TRAINER),
                                   "--results", str(results), *trainer_args], cwd=tmp_path, env=env, timeout=timeout)
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    return launch, rows, [p for p in seen if is_live(p)]


@pytest.mark.timeout(300)
def test_twenty_restructures_in_one_process_keep_ranks_identical_and_memory_flat(tmp_path):
    launch, rows, left = _run(tmp_path, "--max-dendrites", "22")
    assert launch.popen.returncode == 0, launch.stderr[-4000:]
    assert [row["restructure"] for row in rows] == list(range(1, 23))
    assert all(row["identical"] for row in rows), [row for row in rows if not row["identical"]]
    assert len({row["pid"] for row in rows}) == 1 and {row["generation"] for row in rows} == {"1"}
    assert rows[-1]["parameters"] > rows[0]["parameters"]  # dendrites really were added
    assert len({row["fds"] for row in rows}) == 1, [row["fds"] for row in rows]
    assert rows[-1]["rss"] - rows[0]["rss"] < RSS_GROWTH_LIMIT, (rows[0]["rss"], rows[-1]["rss"])
    logged = launch.events("restructured_in_process")
    assert [e["switch"] for e in logged] == [2 * n for n in range(1, 23)]
    assert launch.events("generation_started")[-1]["generation"] == 1 and left == []


@pytest.mark.timeout(300)
def test_a_crash_after_in_process_restructures_resumes_from_the_newest_switch_file(tmp_path):
    launch, rows, left = _run(tmp_path, "--max-dendrites", "8", "--crash-after", "5")
    assert launch.popen.returncode == 0, launch.stderr[-4000:]
    failed = launch.events("generation_failed")
    assert len(failed) == 1 and failed[0]["rank"] == 1 and failed[0]["switch_files"][-1] == "switch_10.pt"
    started = launch.events("generation_started")
    assert [(e["generation"], e["load_folder"]) for e in started] == [(1, None), (2, "PAI")]
    assert "Loaded PAI state from PAI/switch_10.pt" in launch.stdout
    assert [row["restructure"] for row in rows if row["generation"] == "1"] == [1, 2, 3, 4, 5]
    assert (tmp_path / "PAI" / ".training_complete").is_file() and left == []


def _gloo_pair(tmp_path, case):
    import subprocess
    import sys

    with agent_store() as store_env:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "supervisor")]), "WORLD_SIZE": "2",
               **store_env, "OMP_NUM_THREADS": "1"}
        script = REPO / "tests" / "real" / "rewrap_mismatch_worker.py"
        procs = [subprocess.Popen([sys.executable, str(script), case], cwd=tmp_path, env={**env, "RANK": str(rank),
                                  "LOCAL_RANK": str(rank)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, text=True) for rank in (0, 1)]
        try:
            outputs = [proc.communicate(timeout=80) for proc in procs]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return [proc.returncode for proc in procs], outputs


@pytest.mark.timeout(120)
def test_the_rewrap_frees_the_old_and_builds_the_new_when_the_ranks_agree(tmp_path):
    codes, outputs = _gloo_pair(tmp_path, "same")
    assert codes == [0, 0], outputs
    assert outputs[0][0].strip() == "rewrapped DistributedDataParallel SGD"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case, difference", [
    ("shape", "rank 1's model differs from rank 0's: 0.weight has shape [8, 4], rank 0's [4, 4]"),
    ("values", "rank 1's parameters differ from rank 0's: 1.weight (sum) sums to"),
])
def test_ranks_whose_models_differ_end_with_one_line_naming_the_rank_and_the_difference(tmp_path, case, difference):
    codes, outputs = _gloo_pair(tmp_path, case)
    assert codes == [1, 1], outputs
    for _out, err in outputs:
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines[-1].startswith("pai-launch: after the restructure ") and difference in lines[-1], err
        assert "Traceback" not in err  # one line, not a stack
    for rank in (0, 1):  # the group was freed before the exit, so no gloo thread is left to abort the teardown
        threads = json.loads((tmp_path / f"threads-{rank}.json").read_text())
        assert not [name for name in threads if "gloo" in name], threads
