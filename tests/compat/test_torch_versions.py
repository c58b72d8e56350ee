"""Tier: pai-launch on the other torches and Pythons it supports, each in its own environment.

Each environment (scripts/torch_env.sh: that torch's CUDA build from the registry, which runs on the CPU, with the
torchvision made for it and perforatedai) runs the tiers users meet first, through pai-launch installed from this
checkout. They are this suite's own test files, run by a pytest of their own with PAI_TEST_PYTHON pointing at the
environment's interpreter (tests/helpers.PYTHON); their report is read from its JUnit XML.

The floor is torch 2.4 (what pyproject.toml claims) on the oldest Python perforatedai ships wheels for (3.10): the
real example end to end (cold, warm and in process), the process tests where torch's launcher meets real workers
(signals, a retry, the full cycle, a stall) and the teardown grace.
The middle is torch 2.7.1, the Dockerfile's default base, on the newest Python (3.12): the real example. The top is
the newest torch, 2.15.0 (what a user who installs today gets, with the torchvision 0.29.2 pip gives it), on 3.12:
the real example, the teardown grace, and the whole unit tier in its own interpreter (its pytest, with the test
extra installed), where torch is imported in the test process itself. The project's own environment (torch 2.13 on
Python 3.11) runs every tier anyway.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.torch

#: What the floor runs: the real example (cold, warm, in process), the process tests where torch's launcher meets
#: real workers (signals delivered, a retry, the full cycle, a stall's signals, a failure beside a running peer), and
#: --grace on torch's own stop of a failed generation's survivors. (The policy's histories need no torch: they play
#: in the suite's own process.)
TIER = ("tests/real/test_example.py", "tests/proc/test_launch_signals.py", "tests/proc/test_launch_retry.py",
        "tests/proc/test_launch_cycle.py", "tests/proc/test_launch_stall.py", "tests/proc/test_launch_grace.py")
#: What a torch between them runs: the real example alone (the process tests' torch-facing parts are the floor's; the
#: suite's time is shared).
EXAMPLE_TIER = ("tests/real/test_example.py",)
#: What the newest torch runs beside its own unit tier: the real example and the teardown grace.
NEWEST_TIER = ("tests/real/test_example.py", "tests/proc/test_launch_grace.py")
#: scripts/torch_env.sh's exit code when that Python is not installed here.
NO_PYTHON = 3
INSTALL_TIMEOUT_S = 1500
TIER_TIMEOUT_S = 1500


@dataclass(frozen=True)
class TorchEnv:
    torch: str
    torchvision: str
    python: str
    #: Test files run by the suite's pytest with the environment's interpreter for every process they start.
    tier: tuple[str, ...] = TIER
    #: Test files the environment's own interpreter runs (its pytest imports that torch): the unit tier.
    own_tier: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"torch{self.torch}-py{self.python}"


ENVIRONMENTS = (TorchEnv("2.4.1", "0.19.1", "3.10"), TorchEnv("2.7.1", "0.22.1", "3.12", tier=EXAMPLE_TIER),
                TorchEnv("2.15.0", "0.29.2", "3.12", tier=NEWEST_TIER, own_tier=("tests/unit",)))


def prepared(env: TorchEnv) -> Path:
    """The environment's folder (installed on first use, then kept by version); skip when its Python is missing."""
    extra = ["test"] if env.own_tier else []
    done = subprocess.run([str(REPO / "scripts" / "torch_env.sh"), env.torch, env.torchvision, env.python, *extra],
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    if done.returncode == NO_PYTHON:
        pytest.skip(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, f"scripts/torch_env.sh failed:\n{done.stderr[-4000:]}"
    return Path(done.stdout.strip().splitlines()[-1])


def interpreter_versions(python: Path) -> list[str]:
    probe = "import sys, torch, torchvision; print(torch.__version__, torchvision.__version__, *sys.version_info[:2])"
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def junit_counts(path: Path) -> dict[str, int]:
    suite = ElementTree.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}


def collected(files: tuple[str, ...]) -> int:
    """How many tests `files` hold, as this suite's pytest collects them."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--collect-only", *files],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    found = re.search(r"(\d+) tests? collected", done.stdout)
    assert done.returncode == 0 and found, done.stdout[-2000:] + done.stderr[-2000:]
    return int(found.group(1))


def run_tier(python: Path, files: tuple[str, ...], env: dict[str, str], workdir: Path, name: str) -> dict[str, int]:
    """`python -m pytest FILES` from the checkout, asserted green; its JUnit counts."""
    report = workdir / f"{name}.xml"
    with open(workdir / f"{name}.log", "w") as log:
        done = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-ra",
                               f"--junitxml={report}", *files], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                              stdout=log, stderr=subprocess.STDOUT, timeout=TIER_TIMEOUT_S)
    output = (workdir / f"{name}.log").read_text(errors="replace")
    assert done.returncode == 0, f"the {name} tier failed:\n{output[-8000:]}"
    counts = junit_counts(report)
    assert counts["failures"] == counts["errors"] == counts["skipped"] == 0, (counts, output[-4000:])
    return counts


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 2 * TIER_TIMEOUT_S + 120)
@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda env: env.name)
def test_the_example_signals_and_crash_recovery_pass_on_another_torch_and_python(env, tmp_path):
    venv = prepared(env)
    python = venv / "bin" / "python"
    torch_version, torchvision_version, major, minor = interpreter_versions(python)
    assert torch_version.split("+")[0] == env.torch and torchvision_version.split("+")[0] == env.torchvision
    assert f"{major}.{minor}" == env.python
    run_env = {**os.environ, "PAI_TEST_PYTHON": str(python), "PAI_TEST_EXPECT_TORCH": env.torch}
    counts = run_tier(Path(sys.executable), env.tier, run_env, tmp_path, "tier")
    assert counts["tests"] == collected(env.tier), counts  # every test of the files ran
    print(f"{env.name}: {counts['tests']} passed")
    if env.own_tier:
        # Its own pytest, the checkout's code first: torch is that environment's in the test process too.
        paths = os.pathsep.join([str(REPO / "supervisor"), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
        own_env = {**run_env, "PYTHONPATH": paths}
        own = run_tier(python, env.own_tier, own_env, tmp_path, "own")
        assert own["tests"] >= 1000, own  # the whole unit tier ran
        print(f"{env.name}: its own pytest, {own['tests']} passed")
