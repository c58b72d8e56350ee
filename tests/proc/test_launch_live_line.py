"""On a terminal, a running pai-launch keeps one live status line under its log lines; off the terminal (a file, a
pipe, JSON logs) there is none. The terminal is a real pseudo-terminal on pai-launch's stdout and stderr."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

from pai_launch.supervise.outputs.liveline import CLEAR
from tests.helpers import FAKE_TRAINER, launch_env

pytestmark = pytest.mark.timeout(90)

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def run_on_a_terminal(tmp_path, *pai_args: str, timeout: float = 60) -> tuple[int, str]:
    """pai-launch with stdout and stderr on one pseudo-terminal; returns its exit code and all it wrote there."""
    work = tmp_path / "work"
    work.mkdir()
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pai_launch", *pai_args, str(FAKE_TRAINER), "--train-seconds", "1.5",
                             "--generations", "2"], cwd=work, env=launch_env(tmp_path, {"COLUMNS": "200"}),
                            stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary)
    os.close(secondary)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if ready:
                try:
                    data = os.read(primary, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        return proc.wait(10), b"".join(chunks).decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)


def test_on_a_terminal_a_live_line_shows_the_generation_and_every_log_line_stays_whole(tmp_path):
    rc, shown = run_on_a_terminal(tmp_path, "--nproc", "2")
    shown = shown.replace("\r\n", "\n")  # the terminal's own line ends

    assert rc == 0, shown
    assert CLEAR in shown, "the line is taken away before each write"
    states = [ANSI.sub("", piece) for piece in shown.split(CLEAR)]
    lines = [line for line in states if line.startswith("[pai-launch] ")]
    assert any(line.startswith("[pai-launch] generation 1 · 0 dendrites · ") for line in lines), lines[:5]
    assert any(line.startswith("[pai-launch] generation 2 · 1 dendrite · ") for line in lines), lines[-5:]
    # Between two clears there is at most one status line, and only at the end: nothing was written after it.
    for piece in states:
        assert piece.count("[pai-launch] ") <= 1 and ("[pai-launch] " not in piece
                                                      or "\n" not in piece.split("[pai-launch] ")[1])
    text = ANSI.sub("", shown.replace(CLEAR, "\n"))
    assert re.search(r"^\S+ \[info\s*\] run_finished\b", text, re.M), "log lines still start their own lines"
    assert re.search(r"^\[rank[01]\]: rank [01] generation 1", text, re.M), "so do the workers' lines"
    assert not ANSI.sub("", shown.rsplit(CLEAR, 1)[-1]).startswith("[pai-launch]"), "the line is gone once the run ends"


def test_json_logs_on_a_terminal_get_no_live_line(tmp_path):
    rc, shown = run_on_a_terminal(tmp_path, "--nproc", "1", "--log-format", "json")

    assert rc == 0, shown
    assert "[pai-launch]" not in shown and CLEAR not in shown
    assert '"event": "run_finished"' in shown


def test_off_the_terminal_there_is_no_live_line(scene):
    launch, rc = scene.run("--nproc", "1", "--log-format", "console", script_args=["--generations", "1"])

    assert rc == 0, launch.log_summary()
    assert "[pai-launch]" not in launch.stderr and CLEAR not in launch.stderr
