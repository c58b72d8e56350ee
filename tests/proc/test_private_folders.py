"""Nothing of another run is ever touched: a run's private folders in the temporary folder outlive every other
pai-launch's start, whatever PID namespace that one runs in; and a warm agent whose forkserver lost its temporary
files starts a new forkserver instead of failing the generations after.

The other pai-launch runs under `unshare --pid --fork --mount-proc` with the same TMPDIR, as in a container that
binds the host's /tmp: it cannot see the warm run's pids, only its folders.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from pai_launch.linux import privatedir
from tests.proc.launch_files import wait_event

UNSHARE = ("unshare", "--pid", "--fork", "--mount-proc")


def _private_folders(scene, launch) -> list[Path]:
    """The run's own folders (its log root, and a short temporary root if it needed one): named after its pid."""
    pattern = f"{privatedir.PREFIX}{launch.pid}-*"
    return sorted({Path(p) for base in (scene.tmp, Path("/tmp")) for p in glob.glob(str(base / pattern))})


def _require_unshare() -> None:
    done = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"unshare --pid is not available here: {done.stderr.strip()}")


class FolderWatch:
    """Checks, until the run logs run_finished (it removes its folders only after that), that none of `folders`
    was removed; the first one found missing is kept in `lost`."""

    def __init__(self, launch, folders: list[Path]) -> None:
        self._launch, self._folders = launch, folders
        self.lost: Path | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="folder-watch", daemon=True)
        self._thread.start()

    def _finished(self) -> bool:
        return bool(self._launch.events("run_finished")) or self._launch.popen.poll() is not None

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            missing = [folder for folder in self._folders if not (folder / privatedir.LOCK_NAME).exists()]
            if missing:
                if not self._finished():  # run_finished is logged before the run removes its own folders
                    self.lost = missing[0]
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.mark.timeout(240)
def test_a_warm_runs_folders_survive_pai_launch_starts_in_other_pid_namespaces(scene, make_scene, tmp_path):
    _require_unshare()
    warm = scene.start("--nproc", "2", script_args=["--generations", "4", "--train-seconds", "1",
                                                    "--hold-until", str(scene.hold_file)])
    scene.wait_ready(1, 2)
    ready = wait_event(warm, "agent_ready", 60)
    folders = _private_folders(scene, warm)
    assert folders and all((folder / privatedir.LOCK_NAME).is_file() for folder in folders), folders
    assert [p for folder in folders for p in glob.glob(str(folder / "pymp-*"))], "the forkserver's folder is in one"
    watch = FolderWatch(warm, folders)
    others = []

    def other_run():
        other = make_scene(tmp_path / f"other{len(others)}")
        launch = other.start("--nproc", "1", script_args=["--generations", "1"], env={"TMPDIR": str(scene.tmp)},
                             prefix=UNSHARE)
        others.append(launch)
        return launch

    try:
        for _ in range(2):  # while generation 1 trains: each start sweeps the shared temporary folder
            assert other_run().wait(90) == 0, others[-1].log_summary()
            assert watch.lost is None and all(folder.is_dir() for folder in folders), watch.lost
        scene.hold_file.touch()
        while warm.popen.poll() is None and len(others) < 6:  # and beside generations 2 to 4
            assert other_run().wait(90) == 0, others[-1].log_summary()
        rc = warm.wait(120)
    finally:
        watch.stop()

    assert rc == 0, warm.log_summary()
    assert watch.lost is None, f"{watch.lost} was removed while its run was live"
    assert len(others) >= 3
    assert [e["generation"] for e in warm.events("generation_ended")] == [1, 2, 3, 4]
    assert not warm.events("generation_failed") and not warm.events("forkserver_restarted"), warm.log_summary()
    assert {e["agent_pid"] for e in warm.events("generation_started")} == {ready["agent_pid"]}
    assert not [name for name in scene.tmp_listing() if name.startswith(privatedir.PREFIX)]  # each run removed its own


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lost", ["pymp", "all"])
def test_a_forkserver_whose_temporary_files_were_removed_is_replaced_before_the_next_generation(scene, lost):
    launch = scene.start("--nproc", "2", script_args=["--generations", "3", "--hold-until", str(scene.hold_file)])
    scene.wait_ready(1, 2)
    first = wait_event(launch, "agent_ready", 60)
    folders = _private_folders(scene, launch)
    doomed = [Path(p) for folder in folders for p in glob.glob(str(folder / "pymp-*"))] if lost == "pymp" else folders
    assert doomed, folders
    for path in doomed:  # what a careless /tmp cleaner does mid-run
        shutil.rmtree(path)
    scene.hold_file.touch()
    rc = launch.wait(90)

    assert rc == 0, launch.log_summary()
    restarted = launch.event("forkserver_restarted")
    assert restarted["agent_pid"] == first["agent_pid"] and restarted["forkserver_pid"] != first["forkserver_pid"]
    assert restarted["reason"].endswith("was removed"), restarted  # not "had died": it had not
    assert not launch.events("generation_failed"), launch.log_summary()
    assert [e["agent_pid"] for e in launch.events("generation_started")] == [first["agent_pid"]] * 3
    assert not _private_folders(scene, launch)
