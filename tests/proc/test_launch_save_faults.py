"""Save-folder faults end to end: the folder removed, made unwritable, or its disk full (free space below
max(1 MiB, newest switch file)) while workers run or before a launch: save_folder_failed, the workers stopped
(SIGTERM, grace, SIGKILL), exit 6, and nothing else deleted.

The disk-full tests mount a small tmpfs as the working directory (root only); the unwritable test runs
pai-launch as an unprivileged user (root ignores permissions)."""

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

from tests.helpers import Launch, launch_env, pid_is_live, run_tool, safetensors_bytes, tree_state
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


def test_save_folder_removed_mid_run_stops_the_workers_and_exits_6_deleting_nothing_else(scene):
    (scene.work / "notes.txt").write_text("the user's")
    (scene.work / "data").mkdir()
    (scene.work / "data" / "train.bin").write_bytes(os.urandom(256))
    others = tree_state(scene.work / "data"), (scene.work / "notes.txt").read_text()
    launch = scene.start("--nproc", "2", "--grace", "10", script_args=["--hold-until", str(scene.hold_file)])
    ready = scene.wait_ready(1, 2)
    workers = [pid for pid, _ in ready.values()]

    shutil.rmtree(scene.work / "PAI")
    rc = launch.wait(30)

    assert rc == 6, launch.log_summary()
    _assert_stopped_by_pai_launch(scene, launch, ("removed",))
    assert not [pid for pid in workers if pid_is_live(pid)]
    # Nothing else touched, and the removed folder was not re-created for pai-launch's own state.
    assert sorted(os.listdir(scene.work)) == ["data", "notes.txt"]
    assert (tree_state(scene.work / "data"), (scene.work / "notes.txt").read_text()) == others
    assert len(scene.records()) == 3


def test_save_folder_removed_while_a_retry_waits_exits_6_without_launching_again(scene):
    launch = scene.start("--nproc", "2", "--backoff", "30",
                         script_args=["--fail-rank", "0", "--fail-generation", "1", "--heartbeat", "0.1",
                                      "--train-seconds", "0.3"])
    wait_event(launch, "retry_scheduled", 45)

    shutil.rmtree(scene.work / "PAI")
    rc = launch.wait(20)

    assert rc == 6, launch.log_summary()
    assert "removed" in launch.event("save_folder_failed")["reason"]
    assert [e["generation"] for e in launch.events("generation_started")] == [1]
    assert launch.ended - launch.started < 25, "the 30 s backoff was not waited out"
    assert os.listdir(scene.work) == []


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
    assert {psutil.Process(pid).uids().real for pid, _ in ready.values()} \
        == {psutil.Process(launch.pid).uids().real} == {NOBODY}
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


@pytest.mark.parametrize("mode", [[], ["--data-parallel"]], ids=["ddp", "data_parallel"])
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


def test_a_save_folder_the_init_run_replaces_is_taken_after_it_and_the_old_one_is_left_alone(scene):
    launch, rc = scene.run("--nproc", "2", script_args=["--init-replaces-save", "--generations", "1"], timeout=30)

    assert rc == 0, launch.log_summary()
    assert sorted(os.listdir(scene.work / "PAI.replaced")) == ["array_dims.csv"]  # nothing of ours in the old one
    assert read_state(scene.work / "PAI")["last_exit"]["code"] == 0


def test_a_worker_that_removes_the_save_folder_exits_6_naming_it_and_status_says_it_exited(scene):
    launch = scene.start("--nproc", "2", "--grace", "10",
                         script_args=["--clear-save-generation", "1", "--hold-until", str(scene.hold_file)])
    rc = launch.wait(45)

    assert rc == 6, launch.log_summary()
    reason = launch.event("save_folder_failed")["reason"]
    assert reason.startswith(f"the save folder {scene.work / 'PAI'} was removed while generation 1 was running (a new "
                             "folder of that name has taken its place): if the script deletes its save folder"), reason
    assert launch.event("run_finished")["reason"] == reason
    # The script made the folder again; the run's history and its end went into it, so status reads how it ended.
    shown = run_tool("status", "--json", cwd=scene.work)
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert (status["state"], status["exit_code"]) == ("finished", 6)
    text = run_tool("status", cwd=scene.work).stdout
    assert "finished: exit code 6" in text and "still going" not in text, text


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
