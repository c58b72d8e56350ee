"""scripts/system_tools.sh's apt-get waits for the package manager's lock instead of failing at once: driven with an
apt-get on PATH that reports the lock held a given number of times (the real apt-get's message and exit 100)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.timeout(60)

FAKE_APT_GET = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
n=$(wc -l < "$CALLS")
if [ "$n" -le "$HELD_FOR" ]; then
    echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
    exit 100
fi
[ -n "$FAIL_WITH" ] && { echo "E: $FAIL_WITH" >&2; exit 100; }
exit 0
"""


def run_apt_get(tmp_path, *, held_for: int, wait: int = 600, fail_with: str = ""):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apt-get"
    fake.write_text(FAKE_APT_GET)
    fake.chmod(0o755)
    calls = tmp_path / "calls"
    calls.touch()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls), "HELD_FOR": str(held_for),
           "FAIL_WITH": fail_with, "PAI_APT_LOCK_WAIT": str(wait), "PAI_APT_LOCK_POLL": "0.05"}
    done = subprocess.run(["bash", "-c", f'source "{REPO}/scripts/system_tools.sh"; pai_apt_get "" update -qq'],
                          env=env, capture_output=True, text=True, timeout=30)
    return done, calls.read_text().splitlines()


def test_a_held_lock_is_waited_for_and_the_command_then_runs(tmp_path):
    done, calls = run_apt_get(tmp_path, held_for=2)
    assert done.returncode == 0, done.stderr
    assert calls == ["-o DPkg::Lock::Timeout=600 update -qq"] * 3
    assert done.stderr.count("waiting for the package manager's lock") == 2
    assert "held by process 4242" in done.stderr


def test_another_failure_is_not_retried_and_keeps_its_exit_status_and_message(tmp_path):
    done, calls = run_apt_get(tmp_path, held_for=0, fail_with="Unable to locate package nosuch")
    assert (done.returncode, len(calls)) == (100, 1)
    assert "Unable to locate package nosuch" in done.stderr
    assert "waiting" not in done.stderr


def test_a_lock_held_past_the_wait_fails_with_apts_own_message(tmp_path):
    done, calls = run_apt_get(tmp_path, held_for=1000, wait=0)
    assert (done.returncode, len(calls)) == (100, 1)
    assert "Could not get lock" in done.stderr
