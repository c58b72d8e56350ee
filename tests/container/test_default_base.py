"""`docker build .` with no arguments: the default BASE's torch (a stand-in base with the same torch, since no
registry serves the PyTorch images here) is one the project tests, the image keeps it, and the example trains."""

from __future__ import annotations

import subprocess

import pytest

from tests.compat.test_torch_versions import ENVIRONMENTS
from tests.container.conftest import DEFAULT_BASE, DEFAULT_BASE_TORCH, PODMAN_RUN
from tests.container.test_image import train_example

#: torch versions some tier runs the example on: the project's own pin and every tests/compat environment.
TESTED_TORCH = {"2.13.0", *(env.torch for env in ENVIRONMENTS)}


def test_the_default_base_carries_a_torch_the_project_tests():
    assert DEFAULT_BASE.startswith("pytorch/pytorch:")
    assert DEFAULT_BASE_TORCH in TESTED_TORCH, \
        f"{DEFAULT_BASE}: torch {DEFAULT_BASE_TORCH} is not tested ({TESTED_TORCH})"


@pytest.mark.proc
@pytest.mark.torch
@pytest.mark.timeout(3600)
def test_the_image_on_the_default_base_keeps_its_torch_and_trains_the_example(default_base_image, tmp_path):
    probe = subprocess.run([*PODMAN_RUN, "--rm", "--network", "none", "--entrypoint", "python", default_base_image,
                            "-c",
                            "import torch, perforatedai, pai_launch; print(torch.__version__)"],
                           capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.split()[-1].split("+")[0] == DEFAULT_BASE_TORCH  # the base's torch, not another one pip took
    job, events = train_example(default_base_image, tmp_path)
    ready = [e for e in events if e["event"] == "agent_ready"]
    assert ready and ready[0]["torch"].split("+")[0] == DEFAULT_BASE_TORCH
    assert events[-1]["event"] == "run_finished" and events[-1]["exit_code"] == 0
    assert (job / "PAI" / ".training_complete").is_file() and sorted((job / "PAI").glob("switch_*.pt"))
