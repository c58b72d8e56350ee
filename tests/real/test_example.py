"""Tier 3: the real perforatedai example through pai-launch, init -> restructures -> complete."""

import json
import os

import pytest

from tests.helpers import REPO, is_live, run_pai_launch

EXAMPLE = REPO / "examples" / "train_pai_ddp.py"


def run_example(tmp_path, *args, timeout):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    launch, seen = run_pai_launch(["--log-format", "json", *args], cwd=tmp_path, env=env, timeout=timeout)
    left = [p for p in seen if is_live(p)]
    return launch.popen.returncode, launch.stdout, launch.stderr, launch.events(), seen, left


MODES = {"cold": ("--cold",), "warm": ()}


@pytest.fixture(scope="module")
def example_runs(tmp_path_factory):
    """The example run once with fresh interpreters and once with warm workers: mode -> (folder, run's results)."""
    runs = {}
    for mode, flags in MODES.items():
        folder = tmp_path_factory.mktemp(f"example-{mode}")
        runs[mode] = (folder, *run_example(folder, "--nproc", "2", *flags, str(EXAMPLE), timeout=280))
    return runs


def _progress(out: str) -> list[dict]:
    return [json.loads(line.split("PAI_EXAMPLE ", 1)[1]) for line in out.splitlines() if "PAI_EXAMPLE " in line]


@pytest.mark.timeout(700)
@pytest.mark.parametrize("mode", list(MODES))
def test_real_perforatedai_example_runs_to_completion_over_several_generations(example_runs, mode):
    tmp_path, code, out, err, events, seen, left = example_runs[mode]
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
    (ready,) = [e for e in events if e["event"] == "agent_ready"]
    assert ready["workers"] == mode and len({e["agent_pid"] for e in generations}) == 1
    # The agent says which torch and Python it runs (tests/compat runs this file on other ones and names the torch).
    assert ready["torch"].split("+")[0] == os.environ.get("PAI_TEST_EXPECT_TORCH", ready["torch"].split("+")[0])
    assert ready["python"].count(".") == 2
    if mode == "warm":
        assert "perforatedai.utils_perforatedai" in ready["preloaded"].split(",")
    # Every generation's workers really trained: both ranks report epochs, and each generation ended on purpose.
    progress = _progress(out)
    exits = [p for p in progress if p["event"] in ("restructure_exit", "complete_exit")]
    assert {(p["gen"], p["rank"]) for p in exits} >= {(str(g), r) for g in range(1, len(generations) + 1)
                                                      for r in (0, 1)}
    assert [p["event"] for p in exits if p["rank"] == 0][-1] == "complete_exit"
    assert len(seen) >= 3 and left == []


@pytest.mark.timeout(700)
def test_warm_and_cold_runs_of_the_example_train_alike(example_runs):
    """Same generations, the same switch files and the same validation scores, epoch by epoch and rank by rank."""
    def summary(mode):
        tmp_path, code, out, err, events, seen, left = example_runs[mode]
        assert code == 0, err[-4000:]
        scores = sorted((p["gen"], p["rank"], p["epoch"], p["score"]) for p in _progress(out) if p["event"] == "epoch")
        switches = sorted(p.name for p in (tmp_path / "PAI").glob("switch_*.pt"))
        loads = [e["load_folder"] for e in events if e["event"] == "generation_started"]
        return loads, switches, scores

    cold, warm = summary("cold"), summary("warm")
    assert warm[0] == cold[0] and warm[1] == cold[1]
    assert len(warm[2]) >= 4 and warm[2] == cold[2]


@pytest.mark.timeout(200)
def test_real_example_in_data_parallel_mode(tmp_path):
    code, out, err, events, seen, left = run_example(tmp_path, "--data-parallel", str(EXAMPLE), timeout=180)
    assert code == 0, err[-4000:]
    assert (tmp_path / "PAI" / ".training_complete").is_file()
    assert len(list((tmp_path / "PAI").glob("switch_*.pt"))) >= 2
    assert not any(e["event"] == "generation_started" for e in events)
    assert [e["event"] for e in events if e["event"] in ("init_started",
                                                         "training_started")] == ["init_started", "training_started"]
    assert left == []


@pytest.mark.timeout(700)
def test_status_of_the_finished_real_run_and_its_timeline(example_runs, tmp_path):
    """`pai-launch status`'s engine on the real run's save folder: generations, dendrites, the best score, a PNG."""
    from pai_launch.savefmt import pai_files
    from pai_launch.status import gather as run_status

    folder, code, out, err, events, seen, left = example_runs["warm"]
    assert code == 0, err[-4000:]
    status = run_status.gather(folder / "PAI")
    text = run_status.render_text(status)
    assert (status.state, status.exit_code) == ("finished", 0), text
    started = [e["generation"] for e in events if e["event"] == "generation_started"]
    assert [g.number for g in status.generations] == started and len(started) >= 3
    assert status.generations[-1].outcome == "complete"
    assert {"restructured"} <= {g.outcome for g in status.generations[:-1]}
    assert status.dendrites.count is not None and status.dendrites.count > 0, text
    assert status.scores.best is not None and status.scores.direction == "minimizing", text
    assert status.init is not None and status.init.ok and not status.supervisor.running
    # What a running pai-launch's live status line reads: the same figures.
    assert pai_files.dendrites_and_best(folder / "PAI") == (status.dendrites.count, status.scores.best)
    png = tmp_path / "timeline.png"
    run_status.draw_timeline(status, png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


@pytest.fixture(scope="module")
def in_process_run(tmp_path_factory):
    """The example with --restructure in-process: (folder, run's results)."""
    folder = tmp_path_factory.mktemp("example-in-process")
    return (folder, *run_example(folder, "--nproc", "2", "--restructure", "in-process", str(EXAMPLE), timeout=280))


#: How far an in-process run's validation loss may stray from the restart path's, relative, epoch by epoch: the model
#: lives on in memory instead of being loaded from the switch file, so it is its own trajectory (as PerforatedAI's
#: single-process mode is), not a replay; measured 1.4% at the last epoch.
SCORE_TOLERANCE = 0.05


@pytest.mark.timeout(700)
def test_the_example_restructured_in_process_matches_the_restart_path(example_runs, in_process_run):
    """One generation, the same restructures, switch files and dendrites as the restart path, scores within 5%."""
    from pai_launch.savefmt import pai_files

    restart_folder, code, out, err, events, seen, left = example_runs["warm"]
    assert code == 0, err[-4000:]
    folder, code, in_out, in_err, in_events, in_seen, in_left = in_process_run
    assert code == 0, in_err[-4000:]
    assert [e["generation"] for e in in_events if e["event"] == "generation_started"] == [1]
    restructures = [e for e in in_events if e["event"] == "restructured_in_process"]
    restart_generations = [e for e in events if e["event"] == "generation_started"]
    assert len(restructures) == len(restart_generations) - 1 >= 2
    assert all(e["resumed_s"] >= 0 and e["ranks"] == 2 for e in restructures), restructures
    switches = sorted(p.name for p in (folder / "PAI").glob("switch_*.pt"))
    assert switches == sorted(p.name for p in (restart_folder / "PAI").glob("switch_*.pt"))
    assert [e["file"] for e in restructures] == sorted(switches, key=lambda n: int(n[7:-3]))
    assert pai_files.dendrites_and_best(folder / "PAI")[0] == \
        pai_files.dendrites_and_best(restart_folder / "PAI")[0] > 0
    # The same processes trained throughout: every rank's progress lines after the init run come from one pid.
    progress = [p for p in _progress(in_out) if p["gen"] != "0"]
    assert len({(p["rank"], p["pid"]) for p in progress}) == 2
    assert sum(p["event"] == "restructured" for p in progress) == 2 * len(restructures)
    scores = [p["score"] for p in progress if p["event"] == "epoch" and p["rank"] == 0]
    restart_scores = [p["score"] for p in _progress(out) if p["event"] == "epoch" and p["rank"] == 0]
    assert len(scores) == len(restart_scores) >= 4
    for epoch, (mine, theirs) in enumerate(zip(scores, restart_scores)):
        assert abs(mine - theirs) <= SCORE_TOLERANCE * abs(theirs), (epoch, mine, theirs)
    assert in_events[-1]["event"] == "run_finished" and in_events[-1]["exit_code"] == 0 and in_left == []
