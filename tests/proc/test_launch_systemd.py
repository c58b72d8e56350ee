"""pai-launch under systemd: the notify protocol, recorded by a real AF_UNIX datagram listener that stands in
for the service manager (with the sender's PID from SO_PASSCRED), and the shipped unit checked by
`systemd-analyze verify`. (A retry and a stop told to it: tests/unit/test_histories_systemd.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.notify_listener import NotifyListener

pytestmark = pytest.mark.timeout(90)

UNIT = REPO / "scripts" / "systemd" / "pai-launch@.service"
#: systemd's advice, which pai-launch follows: ping every half of WATCHDOG_USEC.
WATCHDOG_USEC = 400_000


@pytest.fixture
def listener(tmp_path, request):
    address = f"@pai-launch-test-{uuid.uuid4().hex}" if getattr(request, "param", "abstract") == "abstract" \
        else str(tmp_path / "notify.sock")
    made = NotifyListener(address)
    yield made
    made.close()


@pytest.mark.parametrize("listener", ["abstract", "path"], indirect=True)
def test_a_real_run_tells_the_service_manager_ready_first_every_phase_and_stopping_last(scene, listener):
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "3", "--train-seconds", "0.8"],
                           env={"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": str(WATCHDOG_USEC)})
    assert rc == 0, launch.log_summary()
    messages = listener.messages

    assert messages and {m.pid for m in messages} == {launch.pid}  # only the main process speaks (NotifyAccess=main)
    assert messages[0].has("READY=1") and sum(m.has("READY=1") for m in messages) == 1
    assert messages[0].status() == "init run (--perforate_model_parallel)"
    statuses = listener.statuses()
    # The dendrites as `pai-launch status` counts them (the fake trainer's switch_N.pt: N/2), told once each
    # generation's switch file is judged.
    for expected in ("generation 1 running; 0 dendrites", "generation 1 ended: dendrites added, 1 in all",
                     "generation 2 running; 1 dendrite", "generation 2 ended: dendrites added, 2 in all",
                     "generation 3 running; 2 dendrites"):
        assert expected in statuses, statuses
    assert messages[-1].has("STOPPING=1") and sum(m.has("STOPPING=1") for m in messages) == 1
    assert messages[-1].status() == "finished with exit code 0: training complete"
    # The watchdog: every half WATCHDOG_USEC while the loop runs, give or take a loaded machine's tick.
    pings = [m.at for m in messages if m.has("WATCHDOG=1")]
    period = WATCHDOG_USEC / 2 / 1e6
    span = messages[-1].at - messages[0].at
    assert len(pings) >= span / period * 0.6, (len(pings), span)
    assert max(b - a for a, b in zip(pings, pings[1:])) < period + 1.0
    # No child was handed the service manager's variables.
    assert all(r["env"]["NOTIFY_SOCKET"] is None and r["env"]["WATCHDOG_USEC"] is None for r in scene.records())


def test_watchdog_pings_are_only_sent_when_meant_for_pai_launch(scene, listener):
    launch, rc = scene.run("--nproc", "1", script_args=["--generations", "1", "--train-seconds", "0.5"],
                           env={"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": str(WATCHDOG_USEC),
                                "WATCHDOG_PID": "1"})
    assert rc == 0, launch.log_summary()
    assert listener.messages[0].has("READY=1")
    assert not any(m.has("WATCHDOG=1") for m in listener.messages)


@pytest.mark.parametrize("address", ["/nonexistent/notify.sock", "@pai-launch-nobody-listens"])
def test_a_missing_service_manager_never_fails_the_run(scene, address):
    launch, rc = scene.run("--nproc", "2", script_args=["--generations", "2"],
                           env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": str(WATCHDOG_USEC)})
    assert rc == 0, launch.log_summary()


# --- the unit ----------------------------------------------------------------------------------------------
def _verify(unit_text: str, folder: Path) -> subprocess.CompletedProcess:
    """`systemd-analyze verify` on an instance of the template (it exits 0 on warnings: callers read its output)."""
    unit = folder / "pai-launch@demo.service"
    unit.write_text(unit_text)
    return subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                          timeout=60,
                          env={**os.environ, "SYSTEMD_LOG_COLOR": "0"})


def _settings(unit_text: str) -> list[tuple[str, str]]:
    return [tuple(line.split("=", 1)) for line in unit_text.splitlines() if "=" in line and not line.startswith("#")]


@pytest.fixture
def installed_unit():
    """The shipped unit with ExecStart pointing at this environment's pai-launch (systemd-analyze checks that it
    exists)."""
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is missing: install Debian's systemd package (./scripts/test.sh does, as root)")
    text = UNIT.read_text()
    shipped = dict(_settings(text))["ExecStart"].split()[0]
    return text.replace(shipped, str(Path(sys.executable).with_name("pai-launch")), 1)


def test_the_unit_passes_systemd_analyze_verify_without_a_word(installed_unit, tmp_path):
    result = _verify(installed_unit, tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "" and result.stderr.strip() == "", result


@pytest.mark.parametrize("old, new", [("Type=notify", "Type=notifyy"), ("KillMode=mixed", "KillMode=sometimes"),
                                      ("NotifyAccess=main", "NotifyAccess=everyone"),
                                      ("Restart=on-failure", "Restart=often")])
def test_a_broken_copy_of_the_unit_is_caught(installed_unit, tmp_path, old, new):
    assert old in installed_unit
    result = _verify(installed_unit.replace(old, new), tmp_path)
    # systemd-analyze exits 0 on "..., ignoring" warnings: any output at all is a failure.
    assert result.returncode != 0 or result.stdout.strip() or result.stderr.strip()
    assert new.split("=", 1)[1] in result.stdout + result.stderr


def test_a_missing_pai_launch_binary_is_caught_too(tmp_path):
    text = UNIT.read_text().replace("/opt/pai-launch/bin/pai-launch", str(tmp_path / "no" / "pai-launch"))
    result = _verify(text, tmp_path)
    assert "pai-launch" in result.stdout + result.stderr and (result.returncode != 0 or result.stderr.strip())


def test_the_unit_says_what_the_service_needs(installed_unit):
    pairs = _settings(installed_unit)
    settings = dict(pairs)
    assert settings["Type"] == "notify" and settings["NotifyAccess"] == "main" and settings["KillMode"] == "mixed"
    assert settings["Restart"] == "on-failure"
    grace = int(next(v.split("=", 1)[1] for k, v in pairs if k == "Environment" and v.startswith("PAI_LAUNCH_GRACE=")))
    assert int(settings["TimeoutStopSec"].rstrip("s")) > grace
    assert int(settings["WatchdogSec"].rstrip("s")) > 0
    prevented = set(settings["RestartPreventExitStatus"].split())
    assert {"2", "3", "4", "5", "6"} <= prevented  # usage, init failure, budget spent, no progress, save folder
    assert {"129", "130", "143"} <= set(settings["SuccessExitStatus"].split())  # stopped by systemd's own signal
