"""--grace on torch's own teardown of a failed generation: rank 1 exits 1 and the surviving rank 0, stopped by torch
(cold workers: PContext._poll's close(); warm ones: agent.teardown before torch's join) gets the run's grace, not
torch's fixed 30 s. --max-failures 1: the run ends after that one generation (exit 4).

In the compat tier (tests/compat), so it runs on the oldest and newest torch too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import pid_is_live, wait_until

pytestmark = pytest.mark.timeout(150)

TRAINER = Path(__file__).resolve().parent / "slow_stop_trainer.py"
#: torch's own close() timeout, which the survivor's shutdown outlasts (45 s grace) or must never reach (2 s grace).
TORCH_DEFAULT_S = 30


def _start(scene, grace: int, stop_seconds: float):
    return scene.start("--nproc", "2", "--grace", str(grace), "--max-failures", "1", script=TRAINER, instrument=False,
                       script_args=["--dir", str(scene.io), "--stop-seconds", str(stop_seconds)])


def _ran_the_expected_torch(launch) -> None:
    """Under tests/compat, the agent ran the environment's torch (PAI_TEST_EXPECT_TORCH), not this one."""
    torch = launch.event("agent_ready")["torch"].split("+")[0]
    assert torch == os.environ.get("PAI_TEST_EXPECT_TORCH", torch), launch.log_summary()


def _survivor(scene) -> int:
    pid = wait_until(lambda: (scene.io / "rank0.pid").is_file() and (scene.io / "rank0.pid").read_text(), 60,
                     message="rank 0 to start")
    return int(pid)


def test_a_survivor_whose_shutdown_outlasts_torchs_30_s_gets_the_45_s_grace(scene):
    """Cold workers: torch's own close() waits out the grace (the warm path is agent.teardown's, as at 2 s)."""
    scene.extra_env["PAI_LAUNCH_COLD"] = "1"
    launch = _start(scene, 45, TORCH_DEFAULT_S + 5)
    pid = _survivor(scene)

    wait_until((scene.io / "sigterm").is_file, 60, message="rank 0's SIGTERM")
    stopped = wait_until((scene.io / "stopped").is_file, 45 + 15, message="rank 0 to finish its slow shutdown")
    assert stopped and (scene.io / "stopped").read_text() == str(pid)
    assert launch.wait(60) == 4, launch.log_summary()
    failed = launch.event("generation_failed")
    assert failed["rank"] == 1 and failed["exit"] == "exit code 1", failed
    _ran_the_expected_torch(launch)


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_a_survivor_that_will_not_stop_is_killed_at_a_2_s_grace(scene, mode):
    """Its shutdown would end before torch's 30 s: only the grace can keep it from writing its file."""
    if mode == "cold":
        scene.extra_env["PAI_LAUNCH_COLD"] = "1"
    launch = _start(scene, 2, TORCH_DEFAULT_S - 10)
    pid = _survivor(scene)

    wait_until((scene.io / "sigterm").is_file, 60, message="rank 0's SIGTERM")
    wait_until(lambda: not pid_is_live(pid), 60, message="rank 0 to be gone")
    assert not (scene.io / "stopped").exists(), "the survivor finished its shutdown: it was not killed at the grace"
    assert launch.wait(60) == 4, launch.log_summary()
    assert launch.event("generation_failed")["rank"] == 1
    _ran_the_expected_torch(launch)
