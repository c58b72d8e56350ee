"""Save-folder faults end to end: the folder removed, made unwritable, or its disk full (free space below
max(1 MiB, newest switch file)) while workers run or before a launch: save_folder_failed, the workers stopped
(SIGTERM, grace, SIGKILL), exit 6, and nothing else deleted.

The disk-full tests mount a small tmpfs as the working directory (root only); the unwritable test runs
pai-launch as an unprivileged user (root ignores permissions). The folder removed mid-run or during a backoff,
cleared or replaced by a DDP run's init run, or made again by a worker, are played as histories in
tests/unit/test_histories_save_faults.py."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.helpers import Launch, launch_env, run_tool, safetensors_bytes, tree_state
from tests.proc.launch_files import make_resumable, read_events_file, read_state, state_dir, wait_event

pytestmark = pytest.mark.timeout(90)

NOBODY = 65534
IS_ROOT = os.geteuid() == 0
#: An unprivileged user that may still read and search everything (the interpreter may live under /root), but
#: whose writes obey permissions: no CAP_DAC_OVERRIDE, and access(2) ignores capabilities for a non-root uid.
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", "--"]


def _free(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def _fill(folder: Path, leave: int) -> Path:
    """Write a filler file into `folder` until only about `leave` bytes are free on its file system."""
    filler = folder / "filler.bin"
    chunk = b"\0" * (64 * 1024)
    with open(filler, "ab") as handle:
        while _free(folder) - leave >= len(chunk):
            handle.write(chunk)
            handle.flush()
        rest = _free(folder) - leave
        if rest > 0:
            handle.write(b"\0" * rest)
    return filler


def _assert_stopped_by_pai_launch(scene, launch, reason_words: tuple[str, ...]) -> None:
    failed = launch.event("save_folder_failed")
    assert any(word in failed["reason"] for word in reason_words), failed
    finished = launch.event("run_finished")
    assert finished["exit_code"] == 6 and finished["reason"] == failed["reason"]
    # The workers were asked to stop and obeyed; nothing was killed. (torch may add its own SIGTERM to the rank
    # that exits second, so only the kind of signal is checked.)
    (forwarded,) = launch.events("signal_forwarded")
    assert forwarded["signal"] == "SIGTERM" and len(forwarded["pids"]) == 2
    seen = scene.signals()
    assert sorted(seen) == [0, 1] and all(set(names) == {"SIGTERM"} for names in seen.values()), seen
    assert "run_killed" not in launch.event_names()


@pytest.fixture
def tmpfs_work(scene):
    """scene.work as a fresh tmpfs of `size` bytes: call the fixture's value with the size to mount it."""
    mounted = []

    def mount(size: str) -> Path:
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(scene.work)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
        mounted.append(scene.work)
        return scene.work

    yield mount
    for launch in scene.launches:  # nothing may keep the mount busy
        launch.kill()
    for folder in mounted:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_disk_full_mid_run_stops_the_workers_and_exits_6(scene, tmpfs_work):
    work = tmpfs_work("2m")
    launch = scene.start("--nproc", "2", "--grace", "10", script_args=["--hold-until", str(scene.hold_file)])
    scene.wait_ready(1, 2)
    save = work / "PAI"
    before = tree_state(save / "array_dims.csv")

    filler = _fill(work, leave=256 * 1024)  # below the 1 MiB pai-launch requires
    rc = launch.wait(30)

    assert rc == 6, launch.log_summary()
    _assert_stopped_by_pai_launch(scene, launch, ("full", "No space left"))
    assert "KiB free" in launch.event("save_folder_failed")["reason"]
    assert filler.stat().st_size > 1024 * 1024 and tree_state(save / "array_dims.csv") == before
    assert read_state(save)["last_exit"]["code"] == 6


def test_disk_with_less_free_space_than_the_newest_switch_file_fails_before_the_launch(scene, tmpfs_work):
    # 1.25 MiB free is more than the 1 MiB minimum but less than the 1.5 MiB switch file a save would need.
    work = tmpfs_work("4m")
    save = make_resumable(work / "PAI", {2: safetensors_bytes(os.urandom(1536 * 1024))})
    _fill(work, leave=1280 * 1024)
    assert 1024 * 1024 < _free(work) < 1536 * 1024

    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "1"], timeout=30)

    assert rc == 6, launch.log_summary()
    reason = launch.event("save_folder_failed")["reason"]
    assert "full" in reason and "1536 KiB needed" in reason, reason
    assert "generation_started" not in launch.event_names()
    assert scene.records() == [], "no worker was started"
    assert (save / "switch_2.pt").stat().st_size > 1536 * 1024


@pytest.fixture
def nobody_scene(make_scene):
    """A scene whose folders belong to an unprivileged user, outside pytest's root-only temporary folder."""
    if not IS_ROOT or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run pai-launch as another user")
    root = Path(tempfile.mkdtemp(prefix="pai-launch-nobody-", dir="/tmp"))
    root.chmod(0o755)
    scene = make_scene(root)
    launch_env(root)  # makes root/tmp
    for path in [root, *root.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    yield scene
    for launch in scene.launches:
        launch.kill()
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    shutil.rmtree(root, ignore_errors=True)


def _start_as_nobody(scene, *pai_args: str, script_args: list[str]) -> Launch:
    return scene.start(*pai_args, script_args=script_args, env={"HOME": str(scene.root)}, prefix=AS_NOBODY,
                       name="nobody")


def test_save_folder_made_unwritable_mid_run_stops_the_workers_and_exits_6(nobody_scene):
    scene = nobody_scene
    launch = _start_as_nobody(scene, "--nproc", "2", "--grace", "10",
                              script_args=["--hold-until", str(scene.hold_file)])
    ready = scene.wait_ready(1, 2)
    save = scene.work / "PAI"
    assert save.stat().st_uid == NOBODY
    owners = {psutil.Process(pid).uids().real for pid, _ in ready.values()}
    assert owners == {psutil.Process(launch.pid).uids().real} == {NOBODY}
    before = tree_state(save)

    save.chmod(0o555)
    rc = launch.wait(30)

    assert rc == 6, launch.log_summary()
    _assert_stopped_by_pai_launch(scene, launch, ("not writable",))
    def users_files(tree):  # the folder itself (its mode changed) and pai-launch's own state aside
        return {k: v for k, v in tree.items() if k != "." and not k.startswith(".pai-launch")}

    assert users_files(tree_state(save)) == users_files(before)
    assert read_state(save)["last_exit"]["code"] == 6
    assert (state_dir(save) / "lock.node0").read_text().strip() == str(launch.pid)


@pytest.mark.parametrize("mode", [["--data-parallel"]], ids=["data_parallel"])
@pytest.mark.parametrize("existing", [False, True], ids=["new_folder", "existing_folder"])
def test_a_script_that_clears_its_save_folder_in_the_init_run_completes_with_save_name(scene, mode, existing):
    save = scene.work / "PAI"
    if existing:  # an earlier attempt's init output: the init run runs again, and removes it first
        make_resumable(save, switches={})
    launch, rc = scene.run("--nproc", "1", "--save-name", "PAI", *mode,
                           script_args=["--init-clears-save", "--generations", "1"])

    assert rc == 0, launch.log_summary()
    assert launch.event_names().count("init_started") == 1
    assert (save / ".training_complete").is_file()
    events = [e["event"] for e in read_events_file(save)]
    assert events[0] == "run_started" and events[-1] == "run_finished" and "init_exited" in events
    assert read_state(save)["last_exit"]["code"] == 0
    shown = run_tool("status", "--json", cwd=scene.work)
    assert shown.returncode == 0 and json.loads(shown.stdout)["exit_code"] == 0, shown.stderr


def test_a_removed_and_recreated_save_folder_cannot_be_taken_while_the_first_run_is_stopping(scene):
    first = scene.start("--nproc", "2", "--grace", "5", script_args=["--hang", "--ignore-sigterm"])
    scene.wait_ready(1, 2)
    shutil.rmtree(scene.work / "PAI")
    (scene.work / "PAI").mkdir()
    wait_event(first, "signal_forwarded", 20)  # it noticed, and waits out the grace for workers that ignore SIGTERM

    second, rc = scene.run("--nproc", "2", timeout=30)

    assert rc == 2, second.log_summary()
    assert f"another pai-launch (PID {first.pid}) is running on" in second.stderr
    assert first.popen.poll() is None, "the second pai-launch was refused while the first was still stopping"
    assert os.listdir(scene.work / "PAI") == []  # the refused one wrote nothing
    assert first.wait(30) == 6
