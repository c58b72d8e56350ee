"""The runner inside another process (a test host, a notebook): the run's world is made around the run alone."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile

import psutil

from pai_launch.placement.spec import LaunchSpec
from pai_launch.supervise.folder.session import SaveSession
from pai_launch.supervise.loop.runner import Runner
from tests.helpers import FAKE_TRAINER, events_file, wait_until
from tests.scripted_world import own_world


def test_a_run_supervised_inside_another_process_leaves_that_processs_other_children_alone(tmp_path, monkeypatch):
    """A host's own servers (here a sleeping child, its grandchild too) are not the run's: the final sweep kills only
    what the run started, however the run ends."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    host_child = subprocess.Popen([sys.executable, "-c", "import signal, subprocess, sys; "  # both wait to be killed
                                   "subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()']); "
                                   "signal.pause()"])
    try:
        wait_until(lambda: len(psutil.Process(host_child.pid).children()) == 1, 30)
        grandchild = psutil.Process(host_child.pid).children()[0]
        spec = LaunchSpec(script=FAKE_TRAINER, workdir=tmp_path, python=sys.executable, nproc=1, log_format="json",
                          script_args=("--generations", "1"))
        env = {key: value for key, value in os.environ.items() if not key.startswith("PAI_LAUNCH_")}
        inbox: queue.SimpleQueue = queue.SimpleQueue()

        assert Runner(spec, SaveSession(spec, env), inbox, env, (), own_world(spec, env, inbox)).run() == 0

        assert host_child.poll() is None and grandchild.is_running()
        assert "leftovers_killed" not in [e["event"]
                                          for e in events_file(tmp_path / "PAI" / ".pai-launch" / "events.jsonl")]
    finally:
        for proc in psutil.Process(host_child.pid).children(recursive=True):
            proc.kill()
        host_child.kill()
        host_child.wait()
