"""A node agent stops its own workers when something elsewhere ends the generation, but not when its own pai-launch
is stopping the job: that pai-launch signals them itself, and a second SIGTERM would land in the handler of a worker
that is already shutting down.

The workers are real processes in their own sessions (as warm and cold workers are), logging each signal they get.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from types import SimpleNamespace

import psutil
import pytest

from pai_launch.agent import multinode
from pai_launch.agent.control import AgentControl

pytestmark = pytest.mark.timeout(60)

#: Logs every SIGTERM/SIGINT it gets on stdout; exits on SIGINT, or on SIGTERM when told to.
WORKER = """
import signal, sys
exit_on_term = sys.argv[1] == "1"
def log(signum, frame):
    print(signal.Signals(signum).name, flush=True)
    if signum == signal.SIGINT or exit_on_term:
        sys.exit(0)
signal.signal(signal.SIGTERM, log)
signal.signal(signal.SIGINT, log)
print("ready", flush=True)
signal.pause()
while True:
    signal.pause()
"""


def _worker(exit_on_term: bool) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", WORKER, "1" if exit_on_term else "0"], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _generation(worker: subprocess.Popen, control: AgentControl) -> multinode.NodeGeneration:
    request = SimpleNamespace(nodes=SimpleNamespace(node_rank=1), grace=3600.0)  # its SIGKILL backstop never fires in
    # the test session
    generation = multinode.NodeGeneration(request, link=None, generation=1, control=control)
    generation.watch = SimpleNamespace(processes=lambda: [psutil.Process(worker.pid)], ranks={worker.pid: 1})
    return generation


@pytest.mark.proc  # starts processes
def test_a_stop_from_elsewhere_sends_this_nodes_workers_one_sigterm():
    worker = _worker(exit_on_term=True)
    generation = _generation(worker, AgentControl())
    generation._stop_local()
    generation._stop_local()  # a second cause (a peer failed too) sends nothing more
    out, _ = worker.communicate(timeout=20)
    assert out.split() == ["SIGTERM"]
    assert generation.we_stopped and generation.stopped_at is not None


@pytest.mark.proc  # starts processes
def test_when_this_nodes_pai_launch_is_stopping_the_job_the_agent_leaves_the_signal_to_it():
    control = AgentControl()
    control.stop_received(signal.SIGTERM, "SIGTERM to node 1's pai-launch")
    worker = _worker(exit_on_term=False)
    generation = _generation(worker, control)
    generation._stop_local()  # its own stop flag, seen in the store
    worker.send_signal(signal.SIGINT)  # after anything _stop_local sent: the log would show a SIGTERM first
    out, _ = worker.communicate(timeout=20)
    assert out.split() == ["SIGINT"]
    assert generation.we_stopped, "the workers' exits still count as stopped with the job"
