"""Runs that share one --log-dir: each run's logs and warm worker records are its own, one after another, rerun with
--fresh or at the same time, so no run counts, waits for or relays another's."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

MODES = {"warm": {}, "cold": {"PAI_LAUNCH_COLD": "1"}}


def _own_lines_only(launch, say: str, others: list[str], generations: int) -> None:
    """Each rank said `say` once per generation on pai-launch's stdout, and no other run's words are there."""
    out = launch.stdout
    for generation in range(1, generations + 1):
        for rank in (0, 1):
            line = f"[rank{rank}]: {say} rank {rank} generation {generation}\n"
            assert out.count(line) == 1, (line, out[-3000:])
    for other in others:
        assert other not in out, (other, out[-3000:])


def _run_folders(logs: Path) -> list[Path]:
    """LOGDIR/<run id>/<start>: one per supervisor start."""
    return sorted(start for run in logs.iterdir() for start in run.iterdir())


@pytest.mark.parametrize("mode", list(MODES))
def test_two_runs_one_after_another_on_one_log_dir_each_see_only_their_own(make_scene, tmp_path, mode):
    logs = tmp_path / "logs"
    first, second = make_scene(tmp_path / "a"), make_scene(tmp_path / "b")

    one, rc = first.run("--nproc", "2", "--log-dir", str(logs), env=MODES[mode],
                        script_args=["--generations", "2", "--say", "run-A"])
    assert rc == 0, one.log_summary()
    two, rc = second.run("--nproc", "2", "--log-dir", str(logs), env=MODES[mode],
                         script_args=["--generations", "2", "--say", "run-B"])

    assert rc == 0, two.log_summary()
    assert two.event("run_finished")["reason"] == "training complete"
    _own_lines_only(one, "run-A", ["run-B"], 2)
    _own_lines_only(two, "run-B", ["run-A"], 2)
    folders = _run_folders(logs)
    assert len(folders) == 2 and {f.parent.name for f in folders} == {one.event("run_finished")["run_id"],
                                                                      two.event("run_finished")["run_id"]}


def test_a_fresh_rerun_on_the_same_log_dir_sees_only_its_own(scene, tmp_path):
    logs = tmp_path / "logs"
    one, rc = scene.run("--nproc", "2", "--log-dir", str(logs), script_args=["--generations", "2", "--say", "first"])
    assert rc == 0, one.log_summary()

    two, rc = scene.run("--nproc", "2", "--log-dir", str(logs), "--fresh",
                        script_args=["--generations", "2", "--say", "again"])

    assert rc == 0, two.log_summary()
    assert [e["generation"] for e in two.events("generation_started")] == [1, 2]
    _own_lines_only(two, "again", ["first"], 2)
    assert len(_run_folders(logs)) == 2


def test_the_same_run_id_started_again_gets_a_folder_of_its_own(make_scene, tmp_path):
    # PAI_LAUNCH_RUN_ID fixed by the user: the start folder under it still keeps the two starts apart.
    logs = tmp_path / "logs"
    env = {"PAI_LAUNCH_RUN_ID": "../shared id"}
    first, second = make_scene(tmp_path / "a"), make_scene(tmp_path / "b")
    one, rc = first.run("--nproc", "2", "--log-dir", str(logs), env=env,
                        script_args=["--generations", "1", "--say", "A"])
    assert rc == 0, one.log_summary()

    two, rc = second.run("--nproc", "2", "--log-dir", str(logs), env=env,
                         script_args=["--generations", "1", "--say", "B"])

    assert rc == 0, two.log_summary()
    _own_lines_only(one, "A", ["B rank"], 1)
    _own_lines_only(two, "B", ["A rank"], 1)
    folders = _run_folders(logs)
    assert [f.parent.name for f in folders] == ["_._shared_id"] * 2 and folders[0] != folders[1]
    for folder in folders:  # torch's per-rank folders too (named after the rendezvous id, made from the run id)
        assert [p.name for p in folder.iterdir()] == ["generation-1"], sorted(folder.rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "logs"], "nothing outside --log-dir"


def test_two_runs_at_the_same_time_on_one_log_dir_each_see_only_their_own(make_scene, tmp_path):
    logs = tmp_path / "logs"
    first, second = make_scene(tmp_path / "a"), make_scene(tmp_path / "b")
    both = ("--generations", "2", "--train-seconds", "1")
    one = first.start("--nproc", "2", "--log-dir", str(logs), script_args=[*both, "--say", "run-A"])
    two = second.start("--nproc", "2", "--log-dir", str(logs), script_args=[*both, "--say", "run-B"])

    assert one.wait(90) == 0, one.log_summary()
    assert two.wait(90) == 0, two.log_summary()
    for launch in (one, two):
        assert [e["exit"] for e in launch.events("generation_ended")] == ["all workers exited 0"] * 2
    _own_lines_only(one, "run-A", ["run-B"], 2)
    _own_lines_only(two, "run-B", ["run-A"], 2)
    assert len(_run_folders(logs)) == 2
